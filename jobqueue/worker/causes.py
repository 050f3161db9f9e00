"""Internal: why a supervised worker process died, in words the log and the metrics share.

A cause is one of: ``"OOM"`` (killed by SIGKILL while the kernel counted an OOM kill in the
supervisor's cgroup: cgroup v2 ``memory.events``, ``oom_kill``), a signal's name (``"SIGKILL"``,
``"SIGSEGV"``...) or ``"exit status N"``. Where the cgroup file cannot be read (cgroup v1, not
Linux) a SIGKILL stays ``"SIGKILL"``: the OOM killer is not named without the kernel saying so.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

#: Where cgroup v2 is mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _memory_events() -> Path | None:
    """Return this process's cgroup v2 ``memory.events`` file, or None if there is none."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            path = CGROUP_ROOT / line[3:].lstrip("/") / "memory.events"
            return path if path.exists() else None
    return None


def _oom_kills(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


class DeathCauses:
    """Name each child's death, and count them by cause (for the log and the metrics)."""

    def __init__(self) -> None:
        self._events = _memory_events()
        self._oom_seen = _oom_kills(self._events)
        #: Deaths so far, by cause.
        self.counts: Counter[str] = Counter()

    def cause(self, status: int) -> str:
        """Return the cause of a death from its ``waitpid`` status, and count it.

        Args:
            status: the status ``os.waitpid`` returned for the child.
        """
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            try:
                cause = signal.Signals(signum).name
            except ValueError:
                cause = f"signal {signum}"
            if signum == signal.SIGKILL:
                oom = _oom_kills(self._events)
                if oom is not None and self._oom_seen is not None and oom > self._oom_seen:
                    cause = "OOM"
                self._oom_seen = oom
        else:
            cause = f"exit status {os.WEXITSTATUS(status)}"
        self.counts[cause] += 1
        return cause

    def summary(self) -> str:
        """Return the counts for a log line: ``"SIGKILL 3, exit status 1: 1"``."""
        return ", ".join(f"{cause}: {n}" for cause, n in self.counts.most_common())
