"""The in-container runner: PID 1 of every sandbox container (copied into each image, stdlib only).

It reads one JSON request per line on its stdin (the host's attach socket), runs it as a child
process in /work and answers one JSON line on stdout. Between requests it kills every other process
in the container and, when asked (warm pool), empties the work dirs. Being PID 1 it cannot be killed
from inside the container, and it marks itself non-dumpable so user code cannot read its stdin or
forge its answers through /proc/1/fd.

When the host's attach connection closes (the owner exited or crashed) stdin reaches EOF and the
runner exits, which stops the container; the owner or the reaper then removes it.

Request:  {"argv": [...], "files": {rel: b64}, "stdin": b64|null, "timeout": s, "output_bytes": n,
           "env": {...}, "clean": bool}
Answer:   {"exit_code", "stdout": b64, "stderr": b64, "duration_s", "timed_out", "oom_killed",
           "output_truncated", "error": str|null}
"""

import base64
import ctypes
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

WORK = "/work"
CLEAN_DIRS = ("/work", "/tmp")
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")


def _set_dumpable(flag):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass


def _oom_kills():
    for path in OOM_FILES:
        try:
            with open(path) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return None


def _children_alive():
    """Reap every child that has exited; whether any is still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _kill_others(proc=None):
    """SIGKILL every process but this one (kill(-1) from PID 1), then reap them all; `proc`, the main child, is
    reaped by its own `wait` (which reads its exit status) before the others."""
    for _ in range(50):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        if proc is not None:
            proc.wait()
        if not _children_alive():
            return
        time.sleep(0.005)


def _empty(path):
    try:
        entries = os.listdir(path)
    except OSError:
        return
    for name in entries:
        full = os.path.join(path, name)
        try:
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full, ignore_errors=True)
            else:
                os.unlink(full)
        except OSError:
            pass


def _write_files(files):
    for rel, data in (files or {}).items():
        if rel.startswith("/") or ".." in rel.split("/"):
            raise ValueError("file path must be relative and stay in the work dir: %r" % rel)
        full = os.path.join(WORK, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as fh:
            fh.write(base64.b64decode(data))


def _child_setup():
    # Make user code the OOM killer's first choice so the runner survives a memory hog. A
    # non-dumpable process's /proc files belong to root, so become dumpable first (exec does anyway).
    _set_dumpable(1)
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(fd, b"1000")
        os.close(fd)
    except OSError:
        pass


def _run(req):
    _write_files(req.get("files"))
    cap = int(req.get("output_bytes", 1 << 20))
    timeout = float(req.get("timeout", 10.0))
    stdin_data = base64.b64decode(req["stdin"]) if req.get("stdin") is not None else None
    oom_before = _oom_kills()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            req["argv"],
            cwd=WORK,
            env=req.get("env") or {},
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_child_setup,
        )
    except (FileNotFoundError, PermissionError) as exc:  # as a shell reports them: 127 and 126
        return {
            "exit_code": 127 if isinstance(exc, FileNotFoundError) else 126,
            "stdout": "",
            "stderr": base64.b64encode(("%s: %s\n" % (req["argv"][0], exc.strerror)).encode()).decode(),
            "duration_s": time.monotonic() - start,
            "timed_out": False,
            "oom_killed": False,
            "output_truncated": False,
            "error": None,
        }
    if stdin_data is not None:
        def feed():
            try:
                proc.stdin.write(stdin_data)
            except OSError:
                pass
            finally:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

        threading.Thread(target=feed, daemon=True).start()
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    truncated = False
    timed_out = False
    sel = selectors.DefaultSelector()
    for pipe in (proc.stdout, proc.stderr):
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe.fileno(), selectors.EVENT_READ)
    deadline = start + timeout
    exited = False
    drain_until = None
    while sel.get_map():
        now = time.monotonic()
        if not exited and proc.poll() is not None:
            # The main process is done: whatever it left running dies now, so the pipes reach EOF.
            exited = True
            _kill_others(proc)
        if now >= deadline and not timed_out and not exited:
            timed_out = exited = True
            _kill_others(proc)
        if exited:
            drain_until = drain_until or now + 2.0
            if now > drain_until:
                break
        for key, _ in sel.select(timeout=0.05):
            fd = key.fd
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                continue
            room = cap - len(bufs[fd])
            if room > 0:
                bufs[fd] += chunk[:room]
            if len(chunk) > room:
                truncated = True
    code = proc.wait()
    duration = time.monotonic() - start
    oom_after = _oom_kills()
    if oom_before is not None and oom_after is not None:
        oom = oom_after > oom_before
    else:
        oom = code == -signal.SIGKILL and not timed_out
    return {
        "exit_code": code,
        "stdout": base64.b64encode(bytes(bufs[proc.stdout.fileno()])).decode(),
        "stderr": base64.b64encode(bytes(bufs[proc.stderr.fileno()])).decode(),
        "duration_s": duration,
        "timed_out": timed_out,
        "oom_killed": oom,
        "output_truncated": truncated,
        "error": None,
    }


def pump(src, dst):
    """Copy one direction of a relayed connection until it closes, then half-close the other side (the host's
    relay in sandboxes/_gateway.py uses this one too)."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _relay(port, path):
    """Gateway relay: 127.0.0.1:port inside the container -> the host's unix socket at path."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)

    def serve():
        while True:
            conn, _ = server.accept()
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(path)
            except OSError:
                conn.close()
                up.close()
                continue
            threading.Thread(target=pump, args=(conn, up), daemon=True).start()
            threading.Thread(target=pump, args=(up, conn), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def main():
    _set_dumpable(0)
    port, path = os.environ.get("ROOTSTEP_RELAY_PORT"), os.environ.get("ROOTSTEP_RELAY_SOCKET")
    if port and path:
        _relay(int(port), path)
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        req = {}
        try:
            req = json.loads(line)
            if req.get("op") == "ping":
                answer = {"pong": True}
            else:
                answer = _run(req)
        except Exception as exc:  # reported to the host, which raises it
            answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()
        _kill_others()
        if req.get("clean"):
            for path in CLEAN_DIRS:
                _empty(path)
    _kill_others()


if __name__ == "__main__":
    main()
