"""Internal: recycling by resident memory (``runworkers --max-memory-per-child MB``).

Long-lived Python processes grow: a handler's cache, a leak in a library, fragmentation. After
each job that ends, the worker reads its resident set size; past the limit it stops claiming,
lets its running jobs finish (``--grace``, then releases the rest, uncharged, as at any stop),
and ends to be replaced: the supervisor starts a fresh child at once, a single process re-runs
its own command line in place, as for a runaway handler (``jobqueue/worker/loop.py``). The reason
is logged, and counted as ``jobqueue_worker_recycles_total{reason="memory"}``.

Resident memory is the process's ``VmRSS`` (``/proc/self/statm``: resident pages times the page
size), the figure an OOM killer and a container's memory limit look at; where ``/proc`` is
missing (macOS), the peak resident size (``getrusage``), which only grows, so the check then
recycles at the first job after the peak passed the limit.
"""

from __future__ import annotations

import os
import resource
import sys

#: Bytes in a megabyte, as the flag counts them (MiB: what ``ps``, ``top`` and cgroups show).
MB = 1024 * 1024


def resident_bytes() -> int:
    """Return this process's resident memory, bytes (``VmRSS``; the peak where /proc is absent)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            resident_pages = int(f.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Kilobytes on Linux, bytes on macOS.
        return peak if sys.platform == "darwin" else peak * 1024


class MemoryLimit:
    """Whether the process has grown past ``max_mb`` megabytes of resident memory.

    Args:
        max_mb: the limit, MB (MiB); None: no limit (:meth:`exceeded` is always None).
    """

    def __init__(self, max_mb: int | None) -> None:
        self.max_mb = max_mb

    def exceeded(self) -> float | None:
        """Return the resident size in MB if it is over the limit, else None (one read)."""
        if self.max_mb is None:
            return None
        resident_mb = resident_bytes() / MB
        return resident_mb if resident_mb > self.max_mb else None
