"""Ordering keys, tenant caps and concurrency keys as one rule: a key, at most N leased (issue 18).

An ordering key is the limit of one in enqueue order; a tenant cap the limit keyed by tenant; a
concurrency key the limit keyed by any string. ``test_one_scenario_over_the_three_surfaces`` runs
the same story on each, on both stores. The rest is the ordering key's own part (issue 15): a job
enqueued while its key has a job waits off the claim's path (state ``waiting``, linked to the key's
last job as to a parent) and is released when that one ends, so the claim never reads it; order
holds through retries, cancels, deaths (expired leases) and an operator's retry.
"""

from __future__ import annotations

from jobqueue.store.plan import ConcurrencyLimits, Limit, TenantCaps, ordering_limit


def test_the_three_limits_are_one_shape():
    caps = TenantCaps(default=3, overrides={"vip": None, "X": 1})
    limits = ConcurrencyLimits(overrides={"acct:1": 2})
    assert caps.limit("X") == Limit("tenant", "X", 1)
    assert caps.limit("other") == Limit("tenant", "other", 3)
    assert caps.limit("vip").most is None and caps.limit("").most is None
    assert limits.limit("acct:1", 5) == Limit("concurrency", "acct:1", 2)  # the setting wins
    assert limits.limit("acct:2", 5) == Limit("concurrency", "acct:2", 5)
    assert ordering_limit("X") == Limit("ordering", "X", 1, ordered=True)
    # Keys of different kinds are different keys.
    assert len({caps.limit("X"), limits.limit("X", 1), ordering_limit("X")}) == 3
