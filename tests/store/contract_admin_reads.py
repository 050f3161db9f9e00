"""Store contract for the admin's reads (mixed into StoreContract: both stores).

``type_totals`` sums each job type's rollup rows of a window over queues and shards (outcome
counts and the run histogram), leaving out the depth samples and the minutes outside the window;
``dead_letter_groups`` groups the dead jobs by their last error's type and message (count, first
and last ``finished_at``), most first; ``dead_letter_ids`` lists one group's jobs (named by the
MD5 of its message), newest first.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from jobqueue.models import Rollup
from jobqueue.models.metrics import bucket_columns
from jobqueue.states import JobState
from jobqueue.store.interface import DeadLetterGroup, message_digest
from tests.factories import error_entry

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

MINUTE = datetime(2030, 1, 2, 12, 0, tzinfo=UTC)
A = "shop.jobs.send_receipt"
B = "shop.jobs.charge_card"


class AdminReadsContract:
    """Needs the host contract's ``make``, ``alias`` and ``store`` fixture."""

    def rollup_row(self, minute: datetime, queue: str, job_type: str, shard: int, **counts):
        Rollup.objects.using(self.alias).create(
            minute=minute, queue=queue, type=job_type, shard=shard, **counts
        )

    def test_type_totals_sums_a_windows_rows_per_type_over_queues_and_shards(self, store):
        runs = bucket_columns("run")
        # A: two queues, two shards, two minutes of the window; one minute before it.
        self.rollup_row(MINUTE, "q", A, 0, succeeded=3, retried=1, run_count=4, run_sum_s=2.0,
                        **{runs[5]: 4, runs[11]: 4})  # fmt: skip
        self.rollup_row(MINUTE, "q", A, 7, succeeded=1, dead=1, run_count=2, run_sum_s=9.0,
                        **{runs[8]: 1, runs[9]: 2, runs[11]: 2})  # fmt: skip
        self.rollup_row(MINUTE + timedelta(minutes=1), "other", A, 0, cancelled=2)
        self.rollup_row(MINUTE - timedelta(minutes=1), "q", A, 0, succeeded=100)
        self.rollup_row(MINUTE, "q", B, 0, dead=5, run_count=5, run_sum_s=1.0,
                        **{runs[0]: 5, runs[11]: 5})  # fmt: skip
        # A depth sample (type "") is no job type.
        self.rollup_row(MINUTE, "q", "", 0, ready=50, lag_s=3.0)
        totals = store.type_totals(MINUTE, MINUTE + timedelta(minutes=2))
        assert [t.type for t in totals] == [B, A]  # by type name
        b, a = totals
        assert (a.succeeded, a.retried, a.dead, a.cancelled) == (4, 1, 1, 2)
        assert (a.runs, a.failures, a.run_count, a.run_sum_s) == (8, 2, 6, 11.0)
        assert a.run_buckets == (0, 0, 0, 0, 0, 4, 0, 0, 1, 2, 0, 6)
        assert (b.runs, b.failures, b.run_buckets[0], b.run_buckets[-1]) == (5, 5, 5, 5)
        assert store.type_totals(MINUTE + timedelta(minutes=5), MINUTE + timedelta(hours=1)) == []

    def test_dead_letter_groups_group_by_the_last_errors_type_and_message(self, store):
        t0 = datetime(2030, 1, 2, 12, 0, tzinfo=UTC)

        def dead(at: datetime, *entries: tuple[str, str]):
            errors = [
                {**error_entry(n), "type": kind, "message": message}
                for n, (kind, message) in enumerate(entries, 1)
            ]
            return self.make(JobState.DEAD, finished_at=at, errors=errors).id

        declined = [
            dead(t0 + timedelta(minutes=m), ("Timeout", "slow"), ("GatewayError", "declined"))
            for m in (5, 1, 9)
        ]
        # Same last type, another message: another group; an earlier entry does not count.
        other = dead(t0 + timedelta(minutes=3), ("GatewayError", "declined"), ("GatewayError", "x"))
        bare = self.make(JobState.DEAD, finished_at=t0, errors=[]).id
        self.make(JobState.SCHEDULED, errors=[error_entry(1)])  # not dead: not a dead letter
        groups = store.dead_letter_groups()
        assert groups == [
            DeadLetterGroup(
                error_type="GatewayError",
                message="declined",
                count=3,
                first_seen=t0 + timedelta(minutes=1),
                last_seen=t0 + timedelta(minutes=9),
                newest_id=max(declined),
            ),
            DeadLetterGroup(
                error_type="GatewayError",
                message="x",
                count=1,
                first_seen=t0 + timedelta(minutes=3),
                last_seen=t0 + timedelta(minutes=3),
                newest_id=other,
            ),
            DeadLetterGroup(
                error_type="", message="", count=1, first_seen=t0, last_seen=t0, newest_id=bare
            ),
        ]
        assert store.dead_letter_groups(limit=1) == groups[:1]
        assert (
            store.dead_letter_ids("GatewayError", message_digest("declined"), 10)
            == sorted(declined)[::-1]
        )
        assert (
            store.dead_letter_ids("GatewayError", message_digest("declined"), 2)
            == sorted(declined)[::-1][:2]
        )
        assert store.dead_letter_ids("GatewayError", message_digest("x"), 10) == [other]
        assert store.dead_letter_ids("", message_digest(""), 10) == [bare]
        assert store.dead_letter_ids("Timeout", message_digest("slow"), 10) == []
