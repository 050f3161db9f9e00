"""Dependencies: settings, @job(dependency=...), RetryAfter(dependency=...), the claim gate, the
breaker's view of outcomes, and the retry budget's delays, in process (real store, no threads).

Process-level behaviour (two workers sharing a breaker, budgets end to end) is in
``test_process_dependencies.py``.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from django.utils import timezone

from jobqueue import checks
from jobqueue.client import job
from jobqueue.errors import JobQueueConfigurationError, PermanentError, RetryAfter
from jobqueue.limits.breakers import BreakerGate, close_breaker, open_breaker, verdict
from jobqueue.limits.budgets import RetryBudgetKeeper, debt_delays
from jobqueue.models import DependencyBreaker, Job
from jobqueue.retries import RunOutcome
from jobqueue.settings.conf import Breaker, RetryBudgetSettings, build_settings
from jobqueue.states import DeadReason, JobState
from jobqueue.store import ClaimedJob, get_store
from jobqueue.worker.executor import failure_outcome
from jobqueue.worker.guard import DependencyGuard
from tests.conftest import requires_postgres
from tests.factories import make_job

#: The lease token of an outcome built by hand (these tests record none).
TOKEN = uuid.uuid4()

PARTNER = "tests.testapp.jobs.call_partner"
NOOP = "tests.testapp.jobs.noop"

# -- settings ------------------------------------------------------------------------------


def test_breaker_and_budget_defaults():
    s = build_settings({})
    assert s.breaker == Breaker(
        failure_threshold=5,
        failure_ratio=0.5,
        window_seconds=30.0,
        cooldown_seconds=10.0,
        max_cooldown_seconds=300.0,
    )
    assert s.retry_budget == RetryBudgetSettings(ratio=0.1, floor_per_second=10.0, capacity=100.0)


def test_partial_breaker_and_budget_settings_keep_the_other_defaults_and_none_turns_budget_off():
    s = build_settings({"BREAKER": {"failure_threshold": 2}, "RETRY_BUDGET": {"ratio": 1}})
    assert (s.breaker.failure_threshold, s.breaker.window_seconds) == (2, 30.0)
    assert (s.retry_budget.ratio, s.retry_budget.capacity) == (1.0, 100.0)
    assert build_settings({"RETRY_BUDGET": None}).retry_budget is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"BREAKER": 5}, "JOBQUEUE['BREAKER'] must be a dict, got 5"),
        ({"BREAKER": {"threshold": 5}}, "JOBQUEUE['BREAKER'] has unknown keys: threshold"),
        (
            {"BREAKER": {"failure_threshold": 0}},
            "JOBQUEUE['BREAKER']['failure_threshold'] must be an integer >= 1, got 0",
        ),
        (
            {"BREAKER": {"failure_ratio": 0}},
            "JOBQUEUE['BREAKER']['failure_ratio'] must be > 0.0, got 0",
        ),
        (
            {"BREAKER": {"failure_ratio": 1.5}},
            "JOBQUEUE['BREAKER']['failure_ratio'] must be <= 1, got 1.5",
        ),
        (
            {"BREAKER": {"window_seconds": -1}},
            "JOBQUEUE['BREAKER']['window_seconds'] must be a number in 0.01..86400 seconds, got -1",
        ),
        (
            {"BREAKER": {"cooldown_seconds": 0}},
            "JOBQUEUE['BREAKER']['cooldown_seconds'] must be a number in 0.01..315360000 seconds, "
            "got 0",
        ),
        (
            {"BREAKER": {"cooldown_seconds": 60, "max_cooldown_seconds": 30}},
            "JOBQUEUE['BREAKER']['max_cooldown_seconds'] (30) must be >= cooldown_seconds (60)",
        ),
        ({"RETRY_BUDGET": {"ratio": 0}}, "JOBQUEUE['RETRY_BUDGET']['ratio'] must be > 0.0, got 0"),
        (
            {"RETRY_BUDGET": {"ratio": 1.01}},
            "JOBQUEUE['RETRY_BUDGET']['ratio'] must be <= 1, got 1.01",
        ),
        (
            {"RETRY_BUDGET": {"floor_per_second": 0}},
            "JOBQUEUE['RETRY_BUDGET']['floor_per_second'] must be > 0.0, got 0",
        ),
        (
            {"RETRY_BUDGET": {"capacity": 0.5}},
            "JOBQUEUE['RETRY_BUDGET']['capacity'] must be >= 1, got 0.5",
        ),
        (
            {"RETRY_BUDGET": {"fraction": 0.1}},
            "JOBQUEUE['RETRY_BUDGET'] has unknown keys: fraction",
        ),
    ],
)
@pytest.mark.django_db  # manage.py check's database checks (W001, W002) connect
def test_bad_breaker_and_budget_settings_are_refused_naming_the_key(raw, message):
    with pytest.raises(JobQueueConfigurationError) as caught:
        build_settings(raw)
    assert str(caught.value).startswith(message)
    with override_settings(JOBQUEUE=raw):
        [error] = checks.check_settings()
        assert (error.id, error.msg) == ("jobqueue.E001", str(caught.value))
        with pytest.raises(SystemCheckError, match=r"jobqueue\.E001"):
            call_command("check", databases=["default"])


def test_job_dependency_is_validated_like_a_queue_name():
    with pytest.raises(
        JobQueueConfigurationError, match=r"dependency name must match .* got 'a b'"
    ):

        @job(name="tests.bad_dependency", dependency="a b")
        def bad():
            pass

    @job(name="tests.good_dependency", dependency="partner-api")
    def good():
        pass

    assert good.dependency == "partner-api"


def test_retry_after_dependency_is_validated():
    assert RetryAfter(3, dependency="partner-api").dependency == "partner-api"
    assert RetryAfter(3).dependency is None
    with pytest.raises(ValueError, match="dependency name must match"):
        RetryAfter(3, dependency="")


# -- outcomes as the breaker sees them -----------------------------------------------------


def claimed_job(job_type: str = PARTNER, job_id: int = 1, attempt: int = 1, **kw) -> ClaimedJob:
    fields = {
        "id": job_id,
        "job_type": job_type,
        "payload": {},
        "attempt": attempt,
        "max_attempts": 3,
        "timeout_s": 30.0,
        "lease_token": uuid.uuid4(),
        "lease_until": datetime(2030, 1, 1, tzinfo=UTC),
        "queue": "q",
        "priority": 0,
        "tenant_id": "",
    }
    fields.update(kw)
    return ClaimedJob(**fields)


def test_verdicts_success_ok_permanent_neutral_everything_else_failed():
    c = claimed_job()
    assert verdict(RunOutcome(job_id=1, lease_token=TOKEN, state=JobState.SUCCEEDED)) == "ok"
    assert verdict(failure_outcome(c, PermanentError("400"), "w")) == "neutral"
    assert verdict(failure_outcome(c, ConnectionError("down"), "w")) == "failed"
    assert verdict(failure_outcome(c, RetryAfter(5), "w")) == "failed"
    spent = claimed_job(attempt=3)
    assert verdict(failure_outcome(spent, ConnectionError("down"), "w")) == "failed"


def test_retry_after_naming_a_dependency_opens_it_even_when_the_job_goes_dead():
    retry = failure_outcome(claimed_job(), RetryAfter(7, dependency="partner"), "w")
    assert (retry.status, retry.delay_s, retry.exact_delay) == ("retry", 7.0, True)
    assert (retry.opens_dependency, retry.opens_for_s) == ("partner", 7.0)
    dead = failure_outcome(claimed_job(attempt=3), RetryAfter(7, dependency="partner"), "w")
    assert (dead.status, dead.opens_dependency) == ("dead", "partner")
    plain = failure_outcome(claimed_job(), RetryAfter(7), "w")
    assert (plain.exact_delay, plain.opens_dependency) == (True, "")


def test_debt_delays_pay_the_debt_at_the_floor_rate():
    assert debt_delays(3, -2.0, 1.0) == [0.0, 1.0, 2.0]
    assert debt_delays(2, 5.0, 1.0) == [0.0, 0.0]
    assert debt_delays(1, -1.0, 2.0) == [0.5]
    assert debt_delays(0, -3.0, 1.0) == []


# -- the gate and the guard, on the real store ---------------------------------------------


@pytest.fixture
def store():
    return get_store("default")


def claim_all(store, n: int) -> list[ClaimedJob]:
    return store.claim(["q"], "w1", n, 30.0)


@pytest.mark.django_db
@override_settings(JOBQUEUE={"BREAKER": {"cooldown_seconds": 4, "max_cooldown_seconds": 8}})
def test_the_gate_lets_everything_through_while_closed(store):
    ids = [make_job(queue="q", type=PARTNER).id, make_job(queue="q", type=NOOP).id]
    claimed = claim_all(store, 2)
    assert sorted(j.id for j in BreakerGate(store, 30.0).admit(claimed)) == sorted(ids)


@pytest.mark.django_db
@override_settings(JOBQUEUE={"BREAKER": {"cooldown_seconds": 4, "max_cooldown_seconds": 8}})
def test_the_gate_holds_back_an_open_dependencys_jobs_without_spending_attempts(store):
    partner = [make_job(queue="q", type=PARTNER).id for _ in range(3)]
    other = make_job(queue="q", type=NOOP).id
    until = open_breaker("partner", 60)
    claimed = claim_all(store, 4)
    admitted = BreakerGate(store, 30.0, random.Random(1)).admit(claimed)
    assert [j.id for j in admitted] == [other]
    for job_id in partner:
        row = Job.objects.get(id=job_id)
        assert (row.state, row.attempts) == (JobState.SCHEDULED, 0)
        # Spread over one base cool-down (4 s) after the breaker's open_until.
        assert until <= row.run_at <= until + timedelta(seconds=4)
        [entry] = row.errors
        assert entry["kind"] == "deferred"
        assert "breaker of dependency 'partner' is open" in entry["message"]


@pytest.mark.django_db
@override_settings(JOBQUEUE={"BREAKER": {"cooldown_seconds": 4, "max_cooldown_seconds": 8}})
def test_after_the_cool_down_one_claimed_job_probes_and_the_rest_wait(store):
    ids = [make_job(queue="q", type=PARTNER).id for _ in range(3)]
    open_breaker("partner", 1)
    claimed = claim_all(store, 3)
    later = claimed[0].lease_until  # 30 s after the claim: the cool-down is long over
    gate = BreakerGate(store, 30.0)
    [probe] = gate.admit(claimed, now=later)
    assert probe.id == claimed[0].id
    assert gate.probes == {probe.id: "partner"}
    breaker = DependencyBreaker.objects.get(name="partner")
    assert (breaker.state, breaker.probe_job_id) == ("half_open", probe.id)
    held = set(ids) - {probe.id}
    assert set(Job.objects.filter(state=JobState.SCHEDULED).values_list("id", flat=True)) == held
    # A second worker's gate does not get a second probe.
    assert BreakerGate(store, 30.0).admit([], now=later) == []
    assert store.claim_probe("partner", 999, 30.0, now=later) is None
    # The probe's success closes the breaker.
    gate.observe(
        [(probe, RunOutcome(job_id=probe.id, lease_token=TOKEN, state=JobState.SUCCEEDED))],
        now=later,
    )
    assert DependencyBreaker.objects.get(name="partner").state == "closed"
    assert gate.probes == {}


@pytest.mark.django_db
@override_settings(
    JOBQUEUE={"BREAKER": {"failure_threshold": 2, "cooldown_seconds": 4, "max_cooldown_seconds": 8}}
)
def test_observe_counts_failures_ignores_permanent_errors_and_honours_retry_after(store, caplog):
    caplog.set_level("WARNING", logger="jobqueue.breakers")
    gate = BreakerGate(store, 30.0)
    c1, c2 = claimed_job(job_id=1), claimed_job(job_id=2)
    gate.observe([(c1, failure_outcome(c1, PermanentError("400"), "w"))] * 3)
    b = DependencyBreaker.objects.get(name="partner")
    assert (b.state, b.failures, b.successes) == ("closed", 0, 0)
    gate.observe([(c1, failure_outcome(c1, ConnectionError("down"), "w"))])
    assert DependencyBreaker.objects.get(name="partner").state == "closed"
    gate.observe([(c2, failure_outcome(c2, ConnectionError("down"), "w"))])
    assert DependencyBreaker.objects.get(name="partner").state == "open"
    # The opening is logged once, naming the dependency (a new user saw no line for it).
    gate.observe([(c2, failure_outcome(c2, ConnectionError("down"), "w"))])
    opened = [r.getMessage() for r in caplog.records if "breaker open after" in r.getMessage()]
    assert opened == [
        "dependency partner: breaker open after 1 failure(s) in this batch; its jobs are held "
        "back for the cool-down"
    ]
    # A handler of another type names a dependency in its RetryAfter: that one opens too.
    noop = claimed_job(NOOP, job_id=3)
    gate.observe([(noop, failure_outcome(noop, RetryAfter(120, dependency="billing"), "w"))])
    billing = DependencyBreaker.objects.get(name="billing")
    assert billing.state == "open"
    assert billing.reason == "RetryAfter(120 s) from a handler"


@pytest.mark.django_db
def test_open_and_close_breaker_from_code():
    import jobqueue

    assert (jobqueue.open_breaker, jobqueue.close_breaker) == (open_breaker, close_breaker)
    with pytest.raises(ValueError, match=r"invalid seconds: must be a number of seconds .*got 0"):
        open_breaker("partner", 0)
    with pytest.raises(ValueError, match="dependency name must match"):
        close_breaker("bad name")
    assert close_breaker("partner") is False
    open_breaker("partner", reason="maintenance window")
    b = DependencyBreaker.objects.get(name="partner")
    assert (b.state, b.reason) == ("open", "maintenance window")
    assert close_breaker("partner", reason="back") is True
    assert DependencyBreaker.objects.get(name="partner").state == "closed"


@pytest.mark.django_db
def test_closing_a_breaker_runs_the_jobs_it_held_back_now():
    """An operator closes a breaker because the dependency is back: its held-back jobs must not
    wait out the cool-down they were pushed to (a new user waited 30 s to 5 min for them)."""
    from jobqueue.store.interface import Deferral
    from tests.testapp import jobs

    store = get_store()
    held = jobqueue_enqueue_partner(jobs)
    [claimed] = store.claim(["default"], "w1", 1, 30.0)
    later = timezone.now() + timedelta(minutes=5)
    deferral = Deferral(id=held, lease_token=claimed.lease_token, run_at=later, message="open")
    store.defer_many([deferral])
    open_breaker("partner", reason="down")
    assert Job.objects.get(id=held).state == "scheduled"
    assert close_breaker("partner", reason="back") is True
    job = Job.objects.get(id=held)
    assert (job.state, job.attempts) == ("ready", 0)
    assert job.run_at <= timezone.now()
    assert [e["kind"] for e in job.errors] == ["deferred"]


def jobqueue_enqueue_partner(jobs) -> int:
    import jobqueue

    return jobqueue.enqueue("default", jobs.call_partner, {"path": "/dev/null", "down_flag": "/x"})


class FakeRun:
    def __init__(self, claimed: ClaimedJob, outcome: RunOutcome) -> None:
        self.claimed, self.outcome = claimed, outcome


@pytest.mark.django_db
@override_settings(
    JOBQUEUE={"RETRY_BUDGET": {"ratio": 0.1, "floor_per_second": 1.0, "capacity": 1.0}}
)
def test_over_budget_retries_are_delayed_never_dropped_and_retry_after_keeps_its_time(store):
    runs = [
        FakeRun(c, failure_outcome(c, ConnectionError("down"), "w", rng=random.Random(0)))
        for c in (claimed_job(NOOP, job_id=i) for i in (1, 2, 3))
    ]
    exact = claimed_job(NOOP, job_id=4)
    runs.append(FakeRun(exact, failure_outcome(exact, RetryAfter(0.25), "w")))
    backoffs = [r.outcome.delay_s for r in runs]
    guard = DependencyGuard(store, 30.0)
    guard.observe(runs)
    # Four retries from a bucket of 1 token: the 2nd, 3rd and 4th owe 1, 2 and 3 tokens, paid
    # at 1 token/s; the backoff (<= 1 s, base 1 s) wins when it is longer.
    assert [r.outcome.status for r in runs] == ["retry"] * 4
    assert [r.outcome.delay_s for r in runs] == [backoffs[0], max(backoffs[1], 1.0), 2.0, 0.25]
    assert "retry_budget_delay_s" not in runs[0].outcome.error
    assert runs[2].outcome.error["retry_budget_delay_s"] == 2.0
    assert runs[3].outcome.exact_delay is True
    # Seen once: the same runs in the next pass (their recording failed) are not charged again.
    guard.observe(runs)
    assert [r.outcome.delay_s for r in runs][2] == 2.0


@pytest.mark.django_db
@override_settings(JOBQUEUE={"RETRY_BUDGET": {"capacity": 1.0}})
def test_success_credits_are_flushed_at_most_once_per_interval(store):
    from jobqueue.models import RetryBudget

    clock = [0.0]
    keeper = RetryBudgetKeeper(store, clock=lambda: clock[0])
    keeper.apply([(claimed_job(NOOP), failure_outcome(claimed_job(NOOP), OSError(), "w"))])
    ok = [
        (
            claimed_job(NOOP, job_id=i),
            RunOutcome(job_id=i, lease_token=TOKEN, state=JobState.SUCCEEDED),
        )
        for i in range(5)
    ]
    keeper.apply(ok)
    assert keeper.pending == {"q": 5}
    clock[0] = 1.0
    keeper.apply(ok)
    assert keeper.pending == {}
    # 10 successes at 0.1 token each, plus the floor for the moments between, capped at 1.
    assert RetryBudget.objects.get(queue="q").tokens == 1.0


@pytest.mark.django_db
@override_settings(JOBQUEUE={"RETRY_BUDGET": None})
def test_no_budget_changes_nothing(store):
    c = claimed_job(NOOP)
    outcome = failure_outcome(c, ConnectionError("down"), "w")
    assert RetryBudgetKeeper(store).apply([(c, outcome)] * 500) == {}


def test_permanent_error_of_a_dependency_job_is_dead_at_once():
    c = claimed_job("tests.testapp.jobs.partner_rejects")
    outcome = failure_outcome(c, PermanentError("400"), "w")
    assert (outcome.status, outcome.dead_reason) == ("dead", DeadReason.PERMANENT_ERROR)


@pytest.mark.django_db
def test_jobs_without_a_dependency_cost_no_query(store, django_assert_num_queries):
    guard = DependencyGuard(store, 30.0)
    jobs = [claimed_job(NOOP, job_id=i) for i in range(10)]
    with django_assert_num_queries(0):
        assert guard.admit(jobs) == jobs
        guard.observe(
            [
                FakeRun(c, RunOutcome(job_id=c.id, lease_token=TOKEN, state=JobState.SUCCEEDED))
                for c in jobs
            ]
        )


@requires_postgres()
@pytest.mark.django_db
def test_one_statement_per_batch_not_per_job(store, django_assert_num_queries):
    partner = [claimed_job(job_id=i) for i in range(5)]
    with django_assert_num_queries(1):  # breaker_states; the breaker has no row: closed
        assert BreakerGate(store, 30.0).admit(partner) == partner
    retries = [
        (claimed_job(NOOP, job_id=i, queue=queue), OSError())
        for i, queue in enumerate(["q", "r"] * 25)
    ]
    runs = [(c, failure_outcome(c, exc, "w")) for c, exc in retries]
    with django_assert_num_queries(1):  # take_retry_tokens, both queues at once
        RetryBudgetKeeper(store).apply(runs)
