"""Running jobs per concurrency key against its limit: store gauge, /metrics, dashboard."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings

from tests.admin.test_pages import DASHBOARD, client_for, text
from tests.ops.test_metrics import RETENTION, scrape
from tests.store.contract_concurrency_gauges import leased


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
