"""The admin judges worker liveness on the database clock, not its own host's (issue 32 item 4).

The worker rows are written by the store (their times are the database's); the admin process's
clock is then moved a few minutes ahead or behind with time-machine, as a web host whose clock
is off would be. Before, the worker page and the dashboard compared the rows with this host's
clock: ahead, every live worker showed dead; behind, a worker silent for minutes showed alive.
"""

from __future__ import annotations

import time

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from jobqueue.models import Worker
from jobqueue.store import get_store

WORKERS = reverse("admin:jobqueue_worker_changelist")
DASHBOARD = reverse("admin:jobqueue_dashboard")

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(admin_user: User) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize("skew_s", [-300.0, 300.0], ids=["behind", "ahead"])
def test_a_live_worker_shows_alive_however_far_off_the_admin_hosts_clock(admin, skew_s):
    get_store("default").register_worker("w-live", ["a"], 4, 10.0)
    with time_machine.travel(time.time() + skew_s, tick=True):
        page = admin.get(WORKERS).content.decode()
        dashboard = admin.get(DASHBOARD).content.decode()
    assert "w-live" in page
    assert page.count('alt="True"') == 1 and 'alt="False"' not in page.split("w-live", 1)[1]
    assert "Workers (1 alive of 1)" in dashboard, dashboard
    assert Worker.objects.with_clock().get(worker_id="w-live").is_alive
