"""Orders, and the payment partner's record of the charges it accepted."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone


class Order(models.Model):
    """An order placed in the shop.

    Placing one enqueues two jobs in the same transaction: the receipt e-mail and the charge
    at the payment partner. The jobs fill in the timestamps below when they succeed.
    """

    customer_email = models.EmailField()
    item = models.CharField(max_length=100)
    amount = models.DecimalField(
        max_digits=10, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))]
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    receipt_sent_at = models.DateTimeField(null=True, blank=True)
    charged_at = models.DateTimeField(null=True, blank=True)
    charge_reference = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Order #{self.pk} {self.item} {self.amount} for {self.customer_email}"


class PartnerCharge(models.Model):
    """A charge the stand-in payment partner accepted (its ledger, see ``partner.py``).

    A real partner keeps this on its side; the unique idempotency key is what makes a repeated
    request with the same key return the first charge instead of charging twice.
    """

    idempotency_key = models.CharField(max_length=100, unique=True)
    reference = models.CharField(max_length=64, unique=True)
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    description = models.CharField(max_length=200, blank=True, default="")
    requests = models.PositiveIntegerField(
        default=1, help_text="How many requests presented this idempotency key."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.reference} {self.amount} (key {self.idempotency_key})"
