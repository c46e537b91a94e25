"""The warm pool: started containers kept ready for short executions.

`acquire` hands out an idle container (or starts one when none is idle); `release` takes it back when
the run left it healthy. The runner empties /work and /tmp and kills every leftover process right
after answering, before it reads the next request, so the next user of a container finds it as new.
A container that timed out on the host side, died, or served `max_uses` runs is removed, and the pool
is topped up again in the background.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable

from rootstep.sandboxes._container import Container, remove_all
from rootstep.sandboxes._limits import PoolConfig


class WarmPool:
    def __init__(self, factory: Callable[[], Container], config: PoolConfig):
        self._factory = factory
        self.config = config
        self._idle: deque[Container] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self._filling = False
        self.stats = {"started": 0, "reused": 0, "removed": 0}

    def _start(self) -> Container:
        container = self._factory()
        with self._lock:
            self.stats["started"] += 1
        return container

    def fill(self) -> None:
        """Start containers until `size` are idle (blocking)."""
        while True:
            with self._lock:
                if self._closed or len(self._idle) >= self.config.size:
                    return
            container = self._start()
            with self._lock:
                if self._closed or len(self._idle) >= self.config.size:
                    extra = container
                else:
                    self._idle.append(container)
                    extra = None
            if extra is not None:
                extra.remove()
                return

    def _fill_in_background(self) -> None:
        with self._lock:
            if self._filling or self._closed:
                return
            self._filling = True

        def work() -> None:
            try:
                self.fill()
            except Exception:
                pass  # the next acquire starts a container itself and reports any error
            finally:
                with self._lock:
                    self._filling = False

        threading.Thread(target=work, name="rootstep-pool-fill", daemon=True).start()

    def acquire(self) -> Container:
        with self._lock:
            if self._closed:
                raise RuntimeError("the sandbox pool was closed")
            container = self._idle.popleft() if self._idle else None
            if container is not None:
                self.stats["reused"] += 1
        if container is None:
            container = self._start()
        return container

    def release(self, container: Container, *, healthy: bool) -> None:
        keep = healthy and not container.closed and container.uses < self.config.max_uses
        with self._lock:
            if keep and not self._closed and len(self._idle) < self.config.size:
                self._idle.append(container)
                return
            self.stats["removed"] += 1
        container.remove()
        self._fill_in_background()

    def idle_ids(self) -> list[str]:
        with self._lock:
            return [c.short_id for c in self._idle]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
        remove_all(idle)
