"""Internal: the rollup's depth sampler, a worker service: each queue's depth and lag once a minute.

Every non-burst worker runs it (``runworkers``); the store writes the first sample of each
minute and nothing for later calls that minute (``sample_depth``), so the cluster counts the
claimable jobs once a minute, with the capped index walk of the metrics' queue gauges, whatever
its size. Sampling every 30 s leaves no minute unsampled while any worker runs. The
dashboard's depth and lag charts read these rows.
"""

from __future__ import annotations

from jobqueue.store import get_store

#: Seconds between samples of one worker: two chances per minute, so one worker alone leaves no
#: minute unsampled, and with the pruner on the same runner (services.start_services) a worker
#: process connects for them twice a minute.
SAMPLE_INTERVAL_S = 30.0


class DepthSampler:
    """Record each queue's claimable count and oldest claimable age for the current minute.

    Args:
        using: database alias of the queue.
    """

    name = "depth sampler"
    interval_s = SAMPLE_INTERVAL_S

    def __init__(self, using: str = "default") -> None:
        self.using = using

    def run_once(self) -> int:
        """Sample now; return how many rollup rows were written (0: sampled already).

        Raises:
            DatabaseError: the database is unavailable.
        """
        return get_store(self.using).sample_depth()
