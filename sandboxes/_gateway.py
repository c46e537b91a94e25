"""Host side of the gateway-only network: a unix socket that relays to the gateway's TCP port.

A container with `SandboxNetwork.gateway_only(port)` still runs with `--network none`. The directory
holding this socket is bind-mounted read-only at /run/rootstep; the runner inside listens on
`127.0.0.1:<container_port>` and relays each connection to the socket, and this relay connects it to
`host:host_port`. Nothing else is reachable: the container has no network interface, and the relay
only ever dials the one address it was given.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading

from ._runner import pump as _pump  # the in-container relay's copy loop

CONTAINER_DIR = "/run/rootstep"
SOCKET_NAME = "gateway.sock"


class GatewayRelay:
    """Accepts on a unix socket in a fresh temporary directory and relays to (host, port)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.directory = tempfile.mkdtemp(prefix="rootstep-gw-")
        os.chmod(self.directory, 0o755)
        self.path = os.path.join(self.directory, SOCKET_NAME)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        os.chmod(self.path, 0o666)  # the sandbox user (uid 1000) connects to it
        self._server.listen(64)
        self._closed = False
        threading.Thread(target=self._serve, name="rootstep-gateway-relay", daemon=True).start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((self.host, self.port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_pump, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, conn), daemon=True).start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        shutil.rmtree(self.directory, ignore_errors=True)
