"""Rate limits (issue 18), in process, on both stores; the setting and its check.

A claim takes a token from every bucket a job falls under (its type's, its dependency's, its
tenant's) and leaves the job claimable-later, with no attempt spent, while one has none; jobs
under no drained bucket keep flowing. Time is the claim's ``now``, so refills are exact here.
The real-process accuracy tests are in test_process_rate_limits.py.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobqueue import checks, registry
from jobqueue.client import job
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.limits.fairness import rate_limits
from jobqueue.settings.conf import build_settings
from jobqueue.settings.rates import RATE_UNITS, Limiter, parse_rate, parse_rate_limits
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.plan import ClaimPlan
from tests.conftest import ROOT, requires_postgres
from tests.factories import make_job
from tests.store.contract_rates import NOOP, OTHER

# -- the setting ------------------------------------------------------------------------------


def test_the_setting_parses_rates_bursts_and_tenants():
    rates = build_settings(
        {
            "RATE_LIMITS": {
                "dependency": {"partner-api": "100/s"},
                "type": {"emails.send": {"rate": "600/min", "burst": 20}},
                "tenant": {"default": "50/s", "overrides": {"big": "500/s", "free": None}},
            }
        }
    ).rate_limits
    assert rates.dependencies["partner-api"].rate == 100
    assert rates.dependencies["partner-api"].burst == 100  # one second's worth by default
    assert (rates.types["emails.send"].rate, rates.types["emails.send"].burst) == (10, 20)
    assert rates.of_tenant("x") == rates.tenant_default
    assert rates.of_tenant("big").rate == 500
    assert rates.of_tenant("free") is None and rates.of_tenant("") is None
    assert parse_rate_limits({"type": {"t": "3/h"}}).types["t"].burst == 1


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"types": {}}, "unknown keys: types"),
        ({"type": {"t": "fast"}}, r"\['type'\]\['t'\] must be a rate"),
        ({"type": {"t": "10/week"}}, r"\['t'\] must be a rate"),
        ({"type": {"t": "0/s"}}, r"\['t'\] \(per second\)"),
        ({"dependency": {"p": "5000000/s"}}, r"\['dependency'\]\['p'\] \(per second\)"),
        ({"type": {"t": {"rate": "5/s", "burst": 0}}}, r"\['t'\] burst"),
        ({"type": {"t": {"rate": "5/s", "brust": 3}}}, r"\['t'\] must be a rate"),
        ({"tenant": {"default": "5/s", "override": {}}}, r"\['tenant'\] must be a dict"),
        ({"tenant": {"overrides": {"a": "lots"}}}, r"\['overrides'\]\['a'\]"),
        ("10/s", r"RATE_LIMITS'\] must be a dict"),
    ],
)
def test_a_bad_rate_limit_is_e001_naming_the_key(bad, named):
    with pytest.raises(JobQueueConfigurationError, match=named):
        build_settings({"RATE_LIMITS": bad})
    with override_settings(JOBQUEUE={"RATE_LIMITS": bad}):
        [message] = checks.check_settings()
        assert message.id == "jobqueue.E001" and "RATE_LIMITS" in message.msg
        with pytest.raises(SystemCheckError, match=r"jobqueue\.E001"):
            call_command("check", databases=["default"])


def test_the_docs_list_exactly_the_rate_units_the_parser_accepts():
    """The fresh-user trial found "5/sec" and "5/hour" accepted while the docs listed only /s,
    /min and /h: the parser's one table (RATE_UNITS) and the docs' sentence now agree."""
    text = (ROOT / "docs" / "rate-limits.md").read_text()
    sentence = text[text.index("- A rate is ") :].split("\n- ", 1)[0]
    listed = {u for u in re.findall(r"`(?:\"<n>/)?([a-z]+)\"?`", sentence)}
    assert listed == set(RATE_UNITS), sentence
    for unit, seconds in RATE_UNITS.items():
        assert parse_rate(f"7200/{unit}", "x").rate == pytest.approx(7200 / seconds)
    with pytest.raises(JobQueueConfigurationError, match=r"units: s, sec, second, min, minute"):
        parse_rate("5/m", "x")


# -- how many statements a claim costs ----------------------------------------------------------


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_a_claim_short_for_want_of_work_is_one_statement_and_a_held_one_claims_again():
    # A declared limit that names none of the waiting jobs: a claim of 10 that finds 2 jobs is
    # short for want of work, and claims once (it was three: the claim, the buckets' check and a
    # second claim, on every idle poll and every pickup of a trickle).
    plan = replace(ClaimPlan.even(1), rates=parse_rate_limits({"type": {NOOP: "1/min"}}))
    store = get_store()
    store.claim(["elsewhere"], "w1", 1, 30.0, plan=plan)  # the bucket appears, full; warm-up
    for _ in range(2):
        make_job(
            JobState.READY, queue="q", type=OTHER, run_at=timezone.now() - timedelta(seconds=1)
        )
    with CaptureQueriesContext(connection) as short:
        assert len(store.claim(["q"], "w1", 10, 30.0, plan=plan)) == 2
    assert len(short.captured_queries) == 1
    # A new tenant under the tenants' default limit has no bucket yet: its jobs are held
    # until the bucket exists, so the claim says it held them, the bucket is made and a
    # second claim takes them, all in one call.
    tenants = replace(plan, rates=parse_rate_limits({"tenant": {"default": "10/s"}}))
    for _ in range(2):
        make_job(JobState.READY, queue="q", type=OTHER, tenant_id="acme")
    with CaptureQueriesContext(connection) as held:
        claimed = store.claim(["q"], "w1", 10, 30.0, plan=tenants)
    assert [j.tenant_id for j in claimed] == ["acme", "acme"]
    assert len(held.captured_queries) == 3


# -- metrics ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_metrics_show_each_limiters_rate_tokens_and_held_jobs(client):
    setting = {
        "RATE_LIMITS": {"type": {NOOP: "1/min"}},
        "METRICS_INTERVAL_SECONDS": 0,
        "METRICS_PUBLIC": True,
    }
    for _ in range(4):
        make_job(JobState.READY, queue="q", type=NOOP, run_at=timezone.now() - timedelta(seconds=1))
    with override_settings(ROOT_URLCONF="tests.metrics_urls", JOBQUEUE=setting):
        plan = replace(ClaimPlan.even(1), rates=rate_limits())
        store = get_store()
        store.claim(["elsewhere"], "w1", 1, 30.0, plan=plan)  # the bucket appears, full
        assert len(store.claim(["q"], "w1", 10, 30.0, plan=plan)) == 1
        text = client.get("/metrics/").content.decode()
    key = f'{{limiter="type:{NOOP}"}}'
    assert f"jobqueue_rate_limit_rate{key} {1 / 60!r}" in text
    assert f"jobqueue_rate_limit_held_jobs{key} 3" in text
    [tokens] = [
        line for line in text.splitlines() if line.startswith(f"jobqueue_rate_limit_tokens{key}")
    ]
    assert 0 <= float(tokens.split()[-1]) < 1


@pytest.mark.django_db
def test_the_dashboard_shows_each_limiter_with_its_held_jobs(client):
    client.force_login(User.objects.create(username="ops", is_staff=True, is_superuser=True))
    for _ in range(3):
        make_job(JobState.READY, queue="q", type=NOOP, run_at=timezone.now() - timedelta(seconds=1))
    with override_settings(JOBQUEUE={"RATE_LIMITS": {"type": {NOOP: "2/h"}}}):
        plan = replace(ClaimPlan.even(1), rates=rate_limits())
        store = get_store()
        store.claim(["elsewhere"], "w1", 1, 30.0, plan=plan)
        assert len(store.claim(["q"], "w1", 10, 30.0, plan=plan)) == 1
        page = client.get(reverse("admin:jobqueue_dashboard")).content.decode()
    page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "Rate limits" in page
    assert f"type:{NOOP} 2/h 1 0.00 2" in page


def test_a_job_type_can_declare_its_rate_limit_and_the_setting_wins(monkeypatch):
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))

    @job(name="tests.rate_limited", rate_limit={"rate": "10/s", "burst": 3})
    def limited():
        pass

    assert rate_limits().types["tests.rate_limited"] == Limiter(10, 3, "10/s")
    assert rate_limits().keys_of("tests.rate_limited", "") == ["type:tests.rate_limited"]
    with override_settings(JOBQUEUE={"RATE_LIMITS": {"type": {"tests.rate_limited": "1/s"}}}):
        assert rate_limits().types["tests.rate_limited"] == Limiter(1, 1, "1/s")
    with pytest.raises(JobQueueConfigurationError, match=r"@job for tests.bad rate_limit must"):

        @job(name="tests.bad", rate_limit="fast")
        def bad():
            pass

    assert "tests.bad" not in registry.registry()
