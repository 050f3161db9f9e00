"""``manage.py place_orders N``: place N random orders, exactly as the order form does."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ...services import place_random_orders
from ..arguments import positive_int


class Command(BaseCommand):
    """Place N random orders; each enqueues a receipt job and a charge job."""

    help = "Place N random orders; each enqueues a receipt e-mail job and a partner charge job."

    def add_arguments(self, parser: CommandParser) -> None:
        """Add N and --seed."""
        parser.add_argument("count", metavar="N", type=positive_int, help="How many orders.")
        parser.add_argument(
            "--seed",
            type=int,
            default=None,
            help="Seed for customers, items and quantities, to repeat a run.",
        )

    def handle(self, *args: Any, count: int, seed: int | None, **options: Any) -> None:
        """Place the orders and say which ones."""
        placed = place_random_orders(count, seed=seed)
        first, last = placed[0], placed[-1]
        self.stdout.write(
            f"Placed {len(placed)} orders (#{first.order.pk}..#{last.order.pk}); enqueued "
            f"{2 * len(placed)} jobs (ids {min(first.job_ids)}..{max(last.job_ids)})."
        )
