"""Placing orders: the one write path shared by the view and the management commands."""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction

from .catalog import random_order
from .jobs import charge_partner, send_receipt
from .models import Order


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedOrder:
    """An order and the ids of the jobs that placing it enqueued."""

    order: Order
    receipt_job_id: int
    charge_job_id: int

    @property
    def job_ids(self) -> tuple[int, int]:
        """Return the ids of both jobs."""
        return (self.receipt_job_id, self.charge_job_id)


def place_order(*, customer_email: str, item: str, amount: Decimal) -> PlacedOrder:
    """Create an order and enqueue its receipt and its charge, all or nothing.

    The jobs join this transaction: if the order is rolled back, no job exists, and once it
    commits both jobs will run. The dedupe keys keep a repeated enqueue for the same order (a
    retried request, a re-run script) from creating a second live job.

    Args:
        customer_email: where the receipt goes.
        item: what was bought.
        amount: the price, in EUR.

    Returns:
        The order and its two job ids.

    Raises:
        django.core.exceptions.ValidationError: a field is invalid; nothing is written.
    """
    order = Order(customer_email=customer_email, item=item, amount=amount)
    order.full_clean()
    with transaction.atomic():
        order.save()
        receipt_job_id = send_receipt.enqueue(order_id=order.pk, dedupe_key=f"receipt:{order.pk}")
        charge_job_id = charge_partner.enqueue(order_id=order.pk, dedupe_key=f"charge:{order.pk}")
    return PlacedOrder(order=order, receipt_job_id=receipt_job_id, charge_job_id=charge_job_id)


def place_random_orders(count: int, *, seed: int | None = None) -> list[PlacedOrder]:
    """Place ``count`` plausible random orders, each in its own transaction, as shoppers would.

    Args:
        count: how many orders to place.
        seed: seeds the choice of customers, items and quantities; ``None`` for a fresh one.

    Returns:
        The placed orders, in the order they were placed.
    """
    rng = random.Random(seed)
    return [place_order(**random_order(rng)) for _ in range(count)]
