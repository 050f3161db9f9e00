"""Running jobs per concurrency key against its limit: store gauge, /metrics, dashboard."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.utils.module_loading import import_string

from jobqueue.states import JobState
from tests.admin.test_pages import DASHBOARD, client_for, text
from tests.conftest import requires_postgres
from tests.factories import make_jobs
from tests.ops.test_metrics import RETENTION, scrape


def leased(count: int, key: str, limit: int, using: str = "default") -> None:
    make_jobs(count, JobState.LEASED, using=using, concurrency_key=key, concurrency_limit=limit)


class GaugeContract:
    alias: str
    store_class: str

    def test_running_per_key_most_first_capped_to_top(self):
        leased(3, "acct:1", 3, self.alias)
        leased(1, "acct:2", 2, self.alias)
        leased(2, "partner", 5, self.alias)
        make_jobs(4, JobState.READY, using=self.alias, concurrency_key="idle", concurrency_limit=1)
        make_jobs(2, JobState.LEASED, using=self.alias)
        store = import_string(self.store_class)(self.alias)
        assert store.running_gauges(2).top_keys == [("acct:1", 3, 3), ("partner", 2, 5)]
        assert store.concurrency_gauges(2) == [("acct:1", 3, 3), ("partner", 2, 5)]


@requires_postgres()
@pytest.mark.django_db(databases=["default", "sqlite"])
class TestPostgresGauges(GaugeContract):
    alias = "default"
    store_class = "jobqueue.store.postgres.PostgresStore"


@pytest.mark.django_db(databases=["default", "sqlite"])
class TestGenericGauges(GaugeContract):
    alias = "sqlite"
    store_class = "jobqueue.store.generic.GenericStore"


@pytest.mark.django_db
def test_metrics_show_running_and_the_limit_in_force_per_key(client):
    leased(2, "acct:1", 2)
    leased(1, "partner", 5)
    settings = {
        "RETENTION": RETENTION,
        "CONCURRENCY_LIMITS": {"partner": 3},
        "METRICS_PUBLIC": True,
    }
    with override_settings(ROOT_URLCONF="tests.metrics_urls", JOBQUEUE=settings):
        s = scrape(client, "/metrics/")
    assert s['jobqueue_concurrency_running{key="acct:1"}'] == 2
    assert s['jobqueue_concurrency_limit{key="acct:1"}'] == 2
    assert s['jobqueue_concurrency_running{key="partner"}'] == 1
    assert s['jobqueue_concurrency_limit{key="partner"}'] == 3


@pytest.mark.django_db
def test_the_dashboard_lists_keys_with_running_and_limit(admin_user):
    leased(2, "acct:1", 2)
    leased(1, "partner", 5)
    page = text(client_for(admin_user).get(DASHBOARD))
    assert "Concurrency limits (the keys running the most)" in page
    words = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "acct:1 2 2" in words and "partner 1 5" in words
    assert page.count('class="jq-at-limit"') == 1
