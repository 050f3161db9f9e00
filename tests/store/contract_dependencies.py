"""Store contract for circuit breakers, deferrals and retry budgets (mixed into StoreContract).

Every time is injected (``now=``) from a fixed origin T, so the expected values are exact.
Settings used throughout: threshold 3 failures that are >= 50 % of the window's outcomes, a
10 s window, a 5 s cool-down doubling up to 12 s.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobqueue.models import DependencyBreaker, RetryBudget
from jobqueue.settings.conf import Breaker, RetryBudgetSettings
from jobqueue.states import JobState
from jobqueue.store.interface import BreakerOutcomes, Deferral

T = datetime(2030, 1, 1, tzinfo=UTC)
CONF = Breaker(
    failure_threshold=3,
    failure_ratio=0.5,
    window_seconds=10,
    cooldown_seconds=5,
    max_cooldown_seconds=12,
)


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def outcomes(ok: int = 0, failed: int = 0, probe: int | None = None, result: str | None = None):
    return [
        BreakerOutcomes(
            name="api", successes=ok, failures=failed, probe_job_id=probe, probe_result=result
        )
    ]


class DependencyContract:
    """Breaker, deferral and budget tests; the host class provides ``alias``, ``make``, ``row``."""

    def breaker(self, name: str = "api") -> DependencyBreaker:
        return DependencyBreaker.objects.using(self.alias).get(name=name)

    def trip(self, store, seconds: float = 0) -> None:
        assert store.record_breaker_outcomes(outcomes(failed=3), CONF, now=at(seconds)) == {
            "api": "open"
        }

    # -- closed -> open ------------------------------------------------------------------------

    def test_breaker_opens_when_failures_pass_both_count_and_ratio(self, store):
        assert store.record_breaker_outcomes(outcomes(failed=2), CONF, now=at(0)) == {
            "api": "closed"
        }
        assert store.record_breaker_outcomes(outcomes(ok=3), CONF, now=at(1)) == {"api": "closed"}
        # 3 failures of 6 outcomes: the count (3) and the ratio (0.5) are both reached.
        assert store.record_breaker_outcomes(outcomes(failed=1), CONF, now=at(2)) == {"api": "open"}
        b = self.breaker()
        assert (b.state, b.open_until, b.cooldown_s, b.opened_count) == ("open", at(7), 5.0, 1)
        assert (b.failures, b.successes, b.last_opened_at) == (0, 0, at(2))
        assert b.reason == "3 failures of 6 outcomes in the window"

    def test_breaker_stays_closed_below_the_ratio(self, store):
        # 3 failures of 7 outcomes: the count is reached, the ratio (0.43 < 0.5) is not.
        store.record_breaker_outcomes(outcomes(ok=4, failed=3), CONF, now=at(0))
        b = self.breaker()
        assert (b.state, b.failures, b.successes) == ("closed", 3, 4)

    def test_breaker_window_starts_over_after_window_seconds(self, store):
        store.record_breaker_outcomes(outcomes(failed=2), CONF, now=at(0))
        assert store.record_breaker_outcomes(outcomes(failed=2), CONF, now=at(10)) == {
            "api": "closed"
        }
        b = self.breaker()
        assert (b.failures, b.window_started_at) == (2, at(10))

    def test_breaker_states_lists_existing_breakers_only(self, store):
        self.trip(store)
        views = store.breaker_states(["api", "other"], now=at(1))
        assert list(views) == ["api"]
        assert (views["api"].state, views["api"].open_until) == ("open", at(5))

    # -- open -> half-open -> closed / open ----------------------------------------------------

    def test_one_probe_after_the_cool_down_and_its_success_closes(self, store):
        self.trip(store)
        assert store.claim_probe("api", 1, 30, now=at(4.9)) is None
        assert store.claim_probe("api", 1, 30, now=at(5)) == at(35)
        assert store.claim_probe("api", 2, 30, now=at(6)) is None
        assert (self.breaker().state, self.breaker().probe_job_id) == ("half_open", 1)
        # Outcomes of other jobs (started before the breaker opened) decide nothing.
        store.record_breaker_outcomes(outcomes(failed=1), CONF, now=at(7))
        assert self.breaker().state == "half_open"
        states = store.record_breaker_outcomes(
            outcomes(ok=1, probe=1, result="ok"), CONF, now=at(8)
        )
        assert states == {"api": "closed"}
        b = self.breaker()
        assert (b.state, b.open_until, b.probe_job_id, b.probe_until) == (
            "closed",
            None,
            None,
            None,
        )
        assert (b.cooldown_s, b.failures, b.opened_count) == (5.0, 0, 1)

    def test_a_failed_probe_reopens_with_the_cool_down_doubled_up_to_the_cap(self, store):
        self.trip(store)
        expected = [(5, 6, 10.0, 16), (16, 17, 12.0, 29), (29, 30, 12.0, 42)]
        for job_id, (probe_at, fail_at, cooldown, until) in enumerate(expected, start=1):
            assert store.claim_probe("api", job_id, 30, now=at(probe_at)) is not None
            states = store.record_breaker_outcomes(
                outcomes(failed=1, probe=job_id, result="failed"), CONF, now=at(fail_at)
            )
            assert states == {"api": "open"}
            b = self.breaker()
            assert (b.cooldown_s, b.open_until, b.opened_count) == (cooldown, at(until), job_id + 1)

    def test_a_lapsed_probe_is_taken_over_and_its_late_result_ignored(self, store):
        self.trip(store)
        assert store.claim_probe("api", 1, 3, now=at(5)) == at(8)
        assert store.claim_probe("api", 2, 3, now=at(7.9)) is None
        assert store.claim_probe("api", 2, 3, now=at(8)) == at(11)
        store.record_breaker_outcomes(outcomes(ok=1, probe=1, result="ok"), CONF, now=at(9))
        b = self.breaker()
        assert (b.state, b.probe_job_id) == ("half_open", 2)

    def test_a_neutral_probe_lets_the_next_claim_probe_at_once(self, store):
        self.trip(store)
        store.claim_probe("api", 1, 30, now=at(5))
        states = store.record_breaker_outcomes(outcomes(probe=1, result="neutral"), CONF, now=at(6))
        assert states == {"api": "open"}
        assert (self.breaker().open_until, self.breaker().cooldown_s) == (at(6), 5.0)
        assert store.claim_probe("api", 2, 30, now=at(6)) == at(36)

    # -- explicit open and close ---------------------------------------------------------------

    def test_open_breaker_creates_extends_never_shortens_and_close_breaker_closes(self, store):
        assert store.open_breaker("api", 60, "RetryAfter(60 s)", CONF, now=at(0)) == at(60)
        assert store.open_breaker("api", 10, "shorter", CONF, now=at(1)) == at(60)
        assert store.open_breaker("api", 100, "longer", CONF, now=at(2)) == at(102)
        b = self.breaker()
        assert (b.state, b.opened_count, b.reason) == ("open", 1, "longer")
        assert store.close_breaker("api", "operator", CONF) is True
        b = self.breaker()
        assert (b.state, b.open_until, b.reason, b.opened_count) == ("closed", None, "operator", 1)
        assert store.close_breaker("never-seen", "operator", CONF) is False

    def test_open_breaker_on_a_half_open_breaker_voids_its_probe(self, store):
        self.trip(store)
        store.claim_probe("api", 1, 30, now=at(5))
        store.open_breaker("api", 20, "RetryAfter(20 s)", CONF, now=at(6))
        store.record_breaker_outcomes(outcomes(ok=1, probe=1, result="ok"), CONF, now=at(7))
        b = self.breaker()
        assert (b.state, b.open_until, b.probe_job_id, b.opened_count) == ("open", at(26), None, 2)

    # -- deferrals -----------------------------------------------------------------------------

    def test_defer_many_gives_the_attempt_back_and_records_why(self, store):
        job = self.make()
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        later = self.now() + timedelta(seconds=40)
        deferral = Deferral(
            id=job.id, lease_token=claimed.lease_token, run_at=later, message="breaker open"
        )
        assert store.defer_many([deferral]) == {job.id: JobState.SCHEDULED}
        row = self.row(job.id)
        assert (row["state"], row["attempts"], row["run_at"]) == (JobState.SCHEDULED, 0, later)
        assert (row["lease_token"], row["lease_until"]) == (None, None)
        [entry] = row["errors"]
        assert {k: entry[k] for k in ("kind", "attempt", "worker", "message")} == {
            "kind": "deferred",
            "attempt": 1,
            "worker": "w1",
            "message": "breaker open",
        }
        from jobqueue.models import Job

        assert Job.objects.using(self.alias).get(id=job.id).last_error is None
        # Fenced: the same lease again changes nothing.
        assert store.defer_many([deferral]) == {}
        [again] = store.claim(["q"], "w2", 1, 30.0, now=later)
        assert again.attempt == 1

    def test_release_deferred_makes_held_jobs_of_the_types_ready_now(self, store):
        held, other_type, failed_since = (self.make() for _ in range(3))
        claimed = store.claim(["q"], "w1", 3, 30.0)
        later = self.now() + timedelta(minutes=10)
        store.defer_many(
            [
                Deferral(id=c.id, lease_token=c.lease_token, run_at=later, message="open")
                for c in claimed
            ]
        )
        from jobqueue.models import Job

        jobs = Job.objects.using(self.alias)
        jobs.filter(id=other_type.id).update(type="tests.testapp.jobs.add")
        # A job whose newest history entry is its own failure keeps its backoff.
        row = jobs.get(id=failed_since.id)
        jobs.filter(id=failed_since.id).update(errors=[*row.errors, {"kind": "error"}])
        assert store.release_deferred([held.type]) == 1
        rows = {r["id"]: r for r in jobs.filter(id__in=[c.id for c in claimed]).values()}
        assert (rows[held.id]["state"], rows[held.id]["attempts"]) == (JobState.READY, 0)
        assert rows[held.id]["run_at"] <= self.now() + timedelta(seconds=1)
        assert (rows[failed_since.id]["state"], rows[failed_since.id]["run_at"]) == (
            JobState.SCHEDULED,
            later,
        )
        assert rows[other_type.id]["state"] == JobState.SCHEDULED
        assert store.release_deferred([]) == 0

    def test_defer_many_of_a_job_whose_cancel_was_requested_cancels_it(self, store):
        job = self.make()
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        assert store.cancel_or_request(job.id) == "leased"
        deferral = Deferral(
            id=job.id, lease_token=claimed.lease_token, run_at=self.now(), message="m"
        )
        assert store.defer_many([deferral]) == {job.id: JobState.CANCELLED}
        assert self.row(job.id)["state"] == JobState.CANCELLED

    # -- retry budgets -------------------------------------------------------------------------

    @pytest.fixture
    def budget(self):
        return RetryBudgetSettings(ratio=0.5, floor_per_second=2.0, capacity=4.0)

    def tokens(self, queue: str = "q") -> float:
        return RetryBudget.objects.using(self.alias).get(queue=queue).tokens

    def test_take_retry_tokens_starts_full_refills_at_the_floor_and_goes_into_debt(
        self, store, budget
    ):
        assert store.take_retry_tokens({"q": 3, "r": 1}, budget, now=at(0)) == {"q": 1.0, "r": 3.0}
        assert store.take_retry_tokens({"q": 3}, budget, now=at(0)) == {"q": -2.0}
        # 1.5 s at 2 tokens/s pays 3 tokens: -2 + 3 - 1.
        assert store.take_retry_tokens({"q": 1}, budget, now=at(1.5)) == {"q": 0.0}
        # Never above capacity: 0 + 2 * 100 s, capped at 4, minus 1.
        assert store.take_retry_tokens({"q": 1}, budget, now=at(101.5)) == {"q": 3.0}

    def test_credit_retry_tokens_adds_ratio_per_success_and_skips_queues_without_a_bucket(
        self, store, budget
    ):
        store.take_retry_tokens({"q": 4}, budget, now=at(0))
        store.credit_retry_tokens({"q": 3, "never-retried": 10}, budget, now=at(0))
        assert self.tokens("q") == 1.5
        assert not RetryBudget.objects.using(self.alias).filter(queue="never-retried").exists()
        store.credit_retry_tokens({"q": 100}, budget, now=at(1))
        assert self.tokens("q") == 4.0
