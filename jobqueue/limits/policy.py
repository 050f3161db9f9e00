"""Internal: the tenant caps, tenant weights and concurrency limits a claim honours.

Read from the settings and the job registry once per worker (and per one-off claim), so the
worker and :func:`jobqueue.claim` build the same :class:`~jobqueue.store.plan.ClaimPlan` parts.
"""

from __future__ import annotations

from jobqueue.registry import registry
from jobqueue.settings.conf import JobQueueSettings
from jobqueue.store.plan import ConcurrencyLimits, TenantCaps

__all__ = ["claim_policy"]


def claim_policy(conf: JobQueueSettings) -> tuple[TenantCaps, ConcurrencyLimits]:
    """Return the tenant caps and weights and the concurrency limits a claim honours.

    Read once per worker (and per one-off claim): the settings, and whether any job type
    registered in this process declares a limit (then claims take turns from the first one).

    Args:
        conf: the validated ``JOBQUEUE`` settings.
    """
    caps = TenantCaps(
        conf.tenant_max_running, conf.tenant_max_running_overrides, conf.tenant_weights
    )
    declared = any(t.concurrency_limit is not None for t in registry().values())
    return caps, ConcurrencyLimits(overrides=conf.concurrency_limits, declared=declared)
