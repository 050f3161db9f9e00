"""The shop's one page: place an order, watch its jobs."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from jobqueue.models import Job

from .forms import OrderForm
from .jobs import charge_partner, send_receipt
from .models import Order
from .services import place_order

#: How many recent orders the page lists.
RECENT_ORDERS = 25


@require_http_methods(["GET", "POST"])
def orders(request: HttpRequest) -> HttpResponse:
    """Show the order form and recent orders; on POST, place an order and redirect."""
    if request.method == "POST":
        form = OrderForm(request.POST)
        if form.is_valid():
            placed = place_order(**form.to_order())
            messages.success(
                request,
                f"Order #{placed.order.pk} placed: receipt job {placed.receipt_job_id}, "
                f"charge job {placed.charge_job_id}.",
            )
            # Post/redirect/get: a reload must not place the order again.
            return redirect("shop:orders")
    else:
        form = OrderForm()
    recent = list(Order.objects.all()[:RECENT_ORDERS])
    states = _job_states(recent)
    # One row per order: the order, then its (receipt job, charge job); None if not found.
    rows = [
        (
            order,
            (
                states.get((send_receipt.name, order.pk)),
                states.get((charge_partner.name, order.pk)),
            ),
        )
        for order in recent
    ]
    return render(
        request,
        "shop/orders.html",
        {"form": form, "rows": rows, "shop_name": settings.SHOP_NAME},
    )


def _job_states(orders: Sequence[Order]) -> dict[tuple[str, int], Job]:
    """Return the newest job of each shop job type per order, keyed by (type, order id)."""
    jobs = (
        Job.objects.filter(
            type__in=[send_receipt.name, charge_partner.name],
            payload__order_id__in=[order.pk for order in orders],
        )
        .only("id", "type", "payload", "state", "attempts", "dead_reason")
        .order_by("id")
    )
    # Later jobs overwrite earlier ones: an order re-enqueued by an operator shows its latest.
    return {(job.type, job.payload["order_id"]): job for job in jobs}
