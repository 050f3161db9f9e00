"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/limits/test_concurrency_gauges.py``, where it had its own pair of stores.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from jobqueue.states import JobState
from tests.factories import make_jobs


def leased(count: int, key: str, limit: int, using: str = "default") -> None:
    make_jobs(count, JobState.LEASED, using=using, concurrency_key=key, concurrency_limit=limit)


class GaugeContract:
    def test_running_per_key_most_first_capped_to_top(self):
        leased(3, "acct:1", 3, self.alias)
        leased(1, "acct:2", 2, self.alias)
        leased(2, "partner", 5, self.alias)
        make_jobs(4, JobState.READY, using=self.alias, concurrency_key="idle", concurrency_limit=1)
        make_jobs(2, JobState.LEASED, using=self.alias)
        store = import_string(self.store_class)(self.alias)
        assert store.running_gauges(2).top_keys == [("acct:1", 3, 3), ("partner", 2, 5)]
        assert store.concurrency_gauges(2) == [("acct:1", 3, 3), ("partner", 2, 5)]
