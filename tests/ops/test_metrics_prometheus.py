"""Issue 31 item 3 and issue 32 item 6: metrics Prometheus accepts, and a view that checks access.

* ``promtool check metrics`` accepts the exposition (Debian's ``prometheus`` package; ``.ci/run``
  installs it; skipped with the reason when it is absent here): real counters (``_total``) and
  histograms (``_bucket{le}``, ``_sum``, ``_count`` under ``# TYPE ... histogram``).
* The counters never fall: the rollup minutes the pruner deletes were folded into the checkpoint.
* The shipped alerting rules pass ``promtool check rules``, and they and the Grafana dashboard
  name only series the exposition has.
* The view refuses anonymous requests (401) unless ``METRICS_TOKEN`` is sent as a bearer token,
  ``METRICS_PUBLIC`` opts in, or a staff user is signed in; the settings are validated and a
  system check warns when the view is mounted with neither.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from jobqueue.checks import check_metrics_access, check_settings
from jobqueue.models import Rollup
from jobqueue.ops.clock import db_now
from jobqueue.settings.conf import build_settings
from jobqueue.states import JobState
from tests.factories import make_job
from tests.ops.test_metrics import parse, rows  # noqa: F401  (the fixture)
from tests.ops.test_metrics_rollup import KEY, run_two

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "contrib" / "prometheus" / "jobqueue-alerts.yml"
DASHBOARD = ROOT / "contrib" / "grafana" / "jobqueue-dashboard.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (Debian: apt-get install prometheus; .ci/run does)",
)
TOKEN = "s3cret-scrape-token-0123456789"
PUBLIC = {"METRICS_PUBLIC": True, "METRICS_INTERVAL_SECONDS": 0}


def exposition(client, **headers: str) -> str:
    with override_settings(ROOT_URLCONF="tests.metrics_urls", JOBQUEUE=PUBLIC):
        response = client.get("/metrics/", **headers)
    assert response.status_code == 200
    return response.content.decode()


def family_names(text: str) -> set[str]:
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


@needs_promtool
def test_promtool_accepts_the_exposition(rows, client):  # noqa: F811
    run_two(db_now() - timedelta(minutes=1), pickup_s=0.3, run_s=2.0)
    make_job(JobState.LEASED, queue="emails", concurrency_key="token=sk_live_abc123")
    text = exposition(client)
    assert "sk_live_abc123" not in text  # label values are masked too
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_counters_histograms_and_build_info_have_their_types(client):
    run_two(db_now() - timedelta(minutes=1), pickup_s=0.3, run_s=2.0)
    text = exposition(client)
    assert "# TYPE jobqueue_job_runs_total counter" in text
    assert "# TYPE jobqueue_lease_expirations_total counter" in text
    assert "# TYPE jobqueue_run_duration_seconds histogram" in text
    assert "# TYPE jobqueue_pickup_latency_seconds histogram" in text
    m = parse(text)
    assert m[f'jobqueue_run_duration_seconds_bucket{{{KEY},le="+Inf"}}'] == 2
    assert m[f"jobqueue_run_duration_seconds_count{{{KEY}}}"] == 2
    [info] = [k for k in m if k.startswith("jobqueue_build_info{")]
    assert 'version="0.' in info and 'django="' in info and m[info] == 1
    # Nothing is a pre-computed rate or per minute any more.
    assert not [n for n in family_names(text) if "per_minute" in n or "per_second" in n]


def test_counters_never_fall_when_the_pruner_deletes_rollup_minutes(client):
    now = db_now()
    run_two(now - timedelta(minutes=4), pickup_s=0.3, run_s=2.0)
    runs = f'jobqueue_job_runs_total{{{KEY},outcome="succeeded"}}'
    assert parse(exposition(client))[runs] == 1
    Rollup.objects.all().delete()  # what the pruner does once the minutes are old enough
    assert parse(exposition(client))[runs] == 1
    # Finished a second before now: a run recorded past now's minute is not read yet (the
    # reads stop at now's minute), and now + 2 s crossed into the next one whenever the test
    # began in a minute's last 2 s (it failed so, once in about 30 runs).
    run_two(now - timedelta(seconds=3), pickup_s=0.3, run_s=2.0)
    assert parse(exposition(client))[runs] == 2


@needs_promtool
def test_the_alerting_rules_pass_promtool_check_rules():
    done = subprocess.run(
        [PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_and_the_dashboard_name_only_exported_series(rows, client):  # noqa: F811
    run_two(db_now() - timedelta(minutes=1), pickup_s=0.3, run_s=2.0)
    exported = family_names(exposition(client))
    exported |= {f"{n}_{s}" for n in exported for s in ("bucket", "sum", "count")}
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named = set(re.findall(r"\bjobqueue_\w+", RULES.read_text() + "\n".join(queries)))
    assert named and named <= exported, named - exported


@override_settings(ROOT_URLCONF="tests.metrics_urls")
@pytest.mark.parametrize("url", ["/metrics/", "/cached/"])
def test_anonymous_scrapes_are_refused_unless_a_setting_allows_them(client, admin_user, url):
    with override_settings(JOBQUEUE={}):
        refused = client.get(url)
        assert refused.status_code == 401
        assert refused["WWW-Authenticate"].startswith("Bearer")
        assert b"jobqueue_" not in refused.content
    with override_settings(JOBQUEUE={"METRICS_TOKEN": TOKEN}):
        assert client.get(url).status_code == 401
        assert client.get(url, HTTP_AUTHORIZATION="Bearer wrong-token-0123456789").status_code == (
            401
        )
        assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    with override_settings(JOBQUEUE={"METRICS_PUBLIC": True}):
        assert client.get(url).status_code == 200
    with override_settings(JOBQUEUE={}):
        client.force_login(admin_user)
        assert client.get(url).status_code == 200


def test_the_metrics_settings_are_validated():
    with pytest.raises(ImproperlyConfigured, match=r"METRICS_TOKEN.*at least 16"):
        build_settings({"METRICS_TOKEN": "short"})
    with pytest.raises(ImproperlyConfigured, match=r"METRICS_PUBLIC.*True or False"):
        build_settings({"METRICS_PUBLIC": "yes"})
    assert build_settings({"METRICS_TOKEN": TOKEN}).metrics_token == TOKEN


def test_a_system_check_warns_when_the_view_is_mounted_without_a_way_in():
    with override_settings(ROOT_URLCONF="tests.metrics_urls", JOBQUEUE={}):
        [warning] = check_metrics_access()
        assert warning.id == "jobqueue.W005" and warning.level == checks.WARNING
    with override_settings(ROOT_URLCONF="tests.metrics_urls", JOBQUEUE={"METRICS_TOKEN": TOKEN}):
        assert check_metrics_access() == []
    with override_settings(JOBQUEUE={}):  # tests.urls: no metrics view mounted
        assert check_metrics_access() == []


def test_e001_reports_every_bad_key_at_once():
    bad = {"CONCURRENCY": 0, "LISTEN_NOTIFY": "yes", "NOPE": 1}
    with override_settings(JOBQUEUE=bad):
        errors = check_settings()
    assert [e.id for e in errors] == ["jobqueue.E001"] * 3
    said = " ".join(e.msg for e in errors)
    assert "NOPE" in said and "CONCURRENCY" in said and "LISTEN_NOTIFY" in said


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_recycles_is_counted_by_reason(client):
    import jobqueue
    from jobqueue.worker.loop import Worker

    jobqueue.enqueue("w", "tests.testapp.jobs.noop", {})
    worker = Worker(queues=["w"], max_tasks=1, install_signal_handlers=False, listen_notify=False)
    assert worker.run() == 0
    m = parse(exposition(client))
    assert m['jobqueue_worker_recycles_total{reason="max_tasks"}'] == 1
    assert m['jobqueue_worker_recycles_total{reason="overrun"}'] == 0
