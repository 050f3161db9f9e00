"""The breakers admin and the dashboard's dependency section, through Django's test client."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobqueue.limits.breakers import open_breaker
from jobqueue.models import DependencyBreaker, RetryBudget
from jobqueue.settings.conf import get_settings
from jobqueue.store import get_store
from tests.admin.test_pages import DASHBOARD, act, client_for, confirm, messages_of, text, user_with

pytestmark = pytest.mark.django_db

BREAKERS = reverse("admin:jobqueue_dependencybreaker_changelist")


def breaker(name: str) -> DependencyBreaker:
    return DependencyBreaker.objects.get(name=name)


@pytest.fixture
def two_breakers() -> tuple[int, int]:
    open_breaker("partner", 60, reason="RetryAfter(60 s) from a handler")
    get_store().open_breaker("billing", 1, "x", get_settings().breaker)
    get_store().close_breaker("billing", "recovered", get_settings().breaker)
    return breaker("partner").id, breaker("billing").id


def test_dashboard_shows_each_breakers_state_and_the_budgets(admin_client, two_breakers):
    RetryBudget.objects.create(queue="emails", tokens=-12.0)
    page = text(admin_client.get(DASHBOARD))
    assert "Dependencies" in page
    assert 'class="jq-breaker-open"' in page and 'class="jq-breaker-closed"' in page
    assert "RetryAfter(60 s) from a handler" in page and "recovered" in page
    assert page.index("partner") < page.index("billing")  # open first
    assert "Retry budgets" in page and "emails" in page and "-12.0" in page


def test_open_asks_for_confirmation_then_opens(two_breakers):
    _, billing = two_breakers
    operator = client_for(user_with("view_dependencybreaker", "operate_dependencybreaker"))
    page = text(act(operator, BREAKERS, "open_selected", [billing]))
    assert "You are about to <strong>open 1 circuit breaker</strong>: billing." in page
    assert breaker("billing").state == "closed"
    response = confirm(operator, BREAKERS, "open_selected", [billing])
    assert messages_of(response) == ["Opened 1 breaker: billing."]
    b = breaker("billing")
    assert (b.state, b.reason) == (
        "open",
        "opened by admin:view_dependencybreaker_operate_dependencybreaker",
    )


def test_close_asks_for_confirmation_then_closes(two_breakers):
    partner, _ = two_breakers
    operator = client_for(user_with("view_dependencybreaker", "operate_dependencybreaker"))
    assert "close 1 circuit breaker" in text(act(operator, BREAKERS, "close_selected", [partner]))
    assert breaker("partner").state == "open"
    response = confirm(operator, BREAKERS, "close_selected", [partner])
    assert messages_of(response) == ["Closed 1 breaker: partner."]
    assert breaker("partner").state == "closed"


def test_without_the_operate_permission_there_are_no_actions(two_breakers):
    partner, _ = two_breakers
    viewer = client_for(user_with("view_dependencybreaker", username="viewer"))
    page = text(viewer.get(BREAKERS))
    assert "partner" in page
    assert "open_selected" not in page and "close_selected" not in page
    confirm(viewer, BREAKERS, "close_selected", [partner])
    assert breaker("partner").state == "open"


def test_deleting_retry_budgets_refills_them(admin_client):
    """Pins what held before deletes went through the store (``budgets.reset_budgets``)."""
    emails = RetryBudget.objects.create(queue="emails", tokens=-12.0)
    sms = RetryBudget.objects.create(queue="sms", tokens=-3.0)
    RetryBudget.objects.create(queue="kept", tokens=-1.0)
    url = reverse("admin:jobqueue_retrybudget_delete", args=[emails.pk])

    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert sorted(RetryBudget.objects.values_list("queue", flat=True)) == ["kept", "sms"]
    changelist = reverse("admin:jobqueue_retrybudget_changelist")
    response = confirm(admin_client, changelist, "delete_selected", [sms.pk])
    assert response.status_code == 302
    assert list(RetryBudget.objects.values_list("queue", flat=True)) == ["kept"]
    # A deleted bucket starts full: the next retry of its queue spends from capacity.
    budget = get_settings().retry_budget
    left = get_store().take_retry_tokens({"emails": 1}, budget)
    assert left == {"emails": budget.capacity - 1}
