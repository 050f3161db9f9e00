"""The dashboard's refresh and charts, server side (Django's test client): the page names its
refresh period and fragment, the fragment is the figures alone, chart axes have round ticks, every
step of a chart carries its values for the hover, and the scripts come from the app's static
files. The browser half (the swap without a reload, the hover) is in test_layout_widths.py.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from jobqueue.admin.charts import PALETTE, y_ticks
from jobqueue.models import Rollup
from jobqueue.ops.clock import db_now
from jobqueue.ops.rollup import minute_of
from jobqueue.states import JobState
from tests.factories import make_jobs

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:jobqueue_dashboard")


def test_the_page_refreshes_its_figures_from_a_fragment_not_by_reloading(admin_client):
    make_jobs(3, JobState.READY, queue="emails")
    page = admin_client.get(DASHBOARD).content.decode()
    assert '<meta http-equiv="refresh"' not in page
    live = re.search(
        r'<div id="jq-live" data-refresh-seconds="(\d+)" data-fragment-url="([^"]+)"', page
    )
    assert live and live[1] == "5"
    assert re.search(r'<script src="[^"]*/static/jobqueue/dashboard\.js" defer>', page)
    assert "//cdn" not in page and "https://" not in page.split("<body")[0]  # nothing external
    fragment = admin_client.get(DASHBOARD + live[2].replace("&amp;", "&")).content.decode()
    assert "<html" not in fragment and "<body" not in fragment
    assert 'data-queue="emails"' in fragment
    assert re.search(r'data-state="ready"><a [^>]*>3</a>', fragment)
    assert 'id="jq-charts"' in fragment  # the charts refresh too


def test_y_ticks_are_round_steps():
    assert y_ticks(18.75) == [0, 5, 10, 15, 20]
    assert y_ticks(37.5) == [0, 10, 20, 30, 40]
    assert y_ticks(23) == [0, 5, 10, 15, 20, 25]
    assert y_ticks(0.3) == [0, 0.1, 0.2, 0.3]
    assert y_ticks(0) == [0, 1]
    assert len(set(PALETTE)) == len(PALETTE)


def test_each_chart_step_carries_every_series_value_for_the_hover(admin_client, settings):
    settings.TIME_ZONE = "UTC"
    minute = minute_of(db_now()) - timedelta(minutes=2)
    Rollup.objects.create(minute=minute, queue="q", type="t", succeeded=12, retried=3, dead=1)
    page = admin_client.get(DASHBOARD, {"refresh": "0"}).content.decode()
    chart = re.search(r'<figure class="jq-chart" id="jq-chart-throughput".*?</figure>', page, re.S)[
        0
    ]
    tips = re.findall(r'<rect class="jq-hover"[^>]*data-tip="([^"]+)"', chart)
    assert len(tips) == 60  # a step per minute of the hour
    stamp = minute.strftime("%H:%M:%S UTC")
    assert f"{stamp} · succeeded 12 · failed 4 (jobs per minute)" in tips
    # The y axis' labels are round: 0, 5, 10, 15 for a top of 12.
    labels = re.findall(
        r'<text x="\d+(?:\.\d)?" y="[\d.]+" text-anchor="end" font-size="12">([^<]+)</text>', chart
    )
    assert labels == ["0", "5", "10", "15"]
