"""Worker ids: the name a worker process holds its leases and its Worker row under."""

from __future__ import annotations

import os
import socket
import uuid


def default_worker_id(pid: int | None = None, nonce: str | None = None) -> str:
    """Return ``host:pid:random`` — unique even when a restarted container reuses host and pid.

    Args:
        pid: the process that will hold the leases; default this one. The supervisor names a
            child by the child's pid, so ``leased_by`` points at the process to signal.
        nonce: the random part; default 6 fresh hex digits.
    """
    pid = os.getpid() if pid is None else pid
    nonce = uuid.uuid4().hex[:6] if nonce is None else nonce
    return f"{socket.gethostname()}:{pid}:{nonce}"
