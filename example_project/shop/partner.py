"""A stand-in for the payment partner's API: slow, sometimes down, never charges a key twice.

It behaves like the partners real shops integrate with:

- Part of the calls fail before reaching the partner (:class:`PartnerUnavailable`, a
  ``ConnectionError``); try again later.
- Some calls are answered "busy, retry after N seconds" (:class:`PartnerBusy`).
- A few calls succeed at the partner but the response is lost on the way back, so the caller
  sees :class:`PartnerUnavailable` although the money moved. Only the idempotency key saves the
  customer from a double charge when the caller retries.
- Test-mode magic values are declined for good (:class:`CardDeclined`): an amount ending in
  ``.13``, or a description naming the ``declined-card`` item.

The partner's ledger is the :class:`~example_project.shop.models.PartnerCharge` table, with a
unique idempotency key: a repeated request with a known key returns the first charge.

The coin flips come from one ``random.Random`` per partner object. Set
``SHOP_PARTNER["SEED"]`` (env ``SHOP_PARTNER_SEED``) to repeat a run's sequence of flips; with
several worker threads the order in which jobs draw from it still varies.
"""

from __future__ import annotations

import functools
import random
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.db import transaction
from django.db.models import F
from django.dispatch import receiver

from .models import PartnerCharge

#: An item the partner's test mode always declines.
DECLINED_ITEM = "declined-card"
#: Amounts whose cents are this are always declined (a test-mode magic value).
DECLINED_CENTS = 13


class PartnerError(Exception):
    """The payment partner did not accept the charge."""


class PartnerUnavailable(PartnerError, ConnectionError):
    """The partner could not be reached, or its answer was lost; the request may be retried."""


class PartnerBusy(PartnerError):
    """The partner asked the caller to come back after ``retry_after_seconds``."""

    def __init__(self, retry_after_seconds: float) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(f"partner busy: retry after {retry_after_seconds:g} s")


class CardDeclined(PartnerError):
    """The partner declined the charge; retrying will not change its mind."""


class IdempotencyKeyReused(PartnerError):
    """The idempotency key was already used for a charge with a different amount."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Charge:
    """A charge the partner accepted.

    Attributes:
        reference: the partner's id for the charge.
        amount: the amount charged.
        created_at: when the partner first accepted it.
        replayed: True when the idempotency key was known and no new charge was made.
    """

    reference: str
    amount: Decimal
    created_at: datetime
    replayed: bool


class PaymentPartner:
    """A flaky payment partner. Thread-safe; one per process is enough.

    Args:
        seed: seeds the coin flips; ``None`` draws a fresh seed.
        unavailable_rate: share of calls that fail before reaching the partner, 0..1.
        lost_response_rate: share of accepted charges whose answer is lost, 0..1.
        busy_rate: share of calls answered "busy, retry after", 0..1.
        busy_retry_after_seconds: the delay a busy answer asks for, seconds.
        latency_seconds: typical time a call takes, seconds (varies 0.5x..1.5x).

    Raises:
        ValueError: a rate outside 0..1, or unavailable + busy rates above 1.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        unavailable_rate: float = 0.25,
        lost_response_rate: float = 0.05,
        busy_rate: float = 0.10,
        busy_retry_after_seconds: float = 0.5,
        latency_seconds: float = 0.02,
    ) -> None:
        for name, rate in (
            ("unavailable_rate", unavailable_rate),
            ("lost_response_rate", lost_response_rate),
            ("busy_rate", busy_rate),
        ):
            if not 0 <= rate <= 1:
                raise ValueError(f"{name} must be between 0 and 1, got {rate}")
        if unavailable_rate + busy_rate > 1:
            total = unavailable_rate + busy_rate
            raise ValueError(f"unavailable_rate + busy_rate must be at most 1, got {total}")
        if busy_retry_after_seconds <= 0 or latency_seconds < 0:
            raise ValueError("busy_retry_after_seconds must be positive, latency_seconds >= 0")
        self.unavailable_rate = unavailable_rate
        self.lost_response_rate = lost_response_rate
        self.busy_rate = busy_rate
        self.busy_retry_after_seconds = busy_retry_after_seconds
        self.latency_seconds = latency_seconds
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def charge(self, *, idempotency_key: str, amount: Decimal, description: str = "") -> Charge:
        """Charge ``amount``, at most once per ``idempotency_key``.

        Args:
            idempotency_key: the caller's key for this charge; the same on every retry.
            amount: the amount to charge.
            description: shown on the statement; test-mode rules read it.

        Returns:
            The charge: a new one, or the first one made with this key.

        Raises:
            PartnerUnavailable: the call failed, possibly after the charge went through.
            PartnerBusy: the partner asked to be called again later.
            CardDeclined: the charge is declined for good.
            IdempotencyKeyReused: the key was used before for another amount.
        """
        # Draw every flip up front, under the lock, so a seeded partner hands out the same
        # sequence however the threads interleave their calls.
        with self._lock:
            roll, lost_roll, latency_roll = (self._rng.random() for _ in range(3))
        time.sleep(self.latency_seconds * (0.5 + latency_roll))
        if roll < self.unavailable_rate:
            raise PartnerUnavailable("connection to the payment partner was refused")
        if roll < self.unavailable_rate + self.busy_rate:
            raise PartnerBusy(self.busy_retry_after_seconds)
        if is_declined(amount=amount, description=description):
            raise CardDeclined(f"card declined for {amount} ({description or 'no description'})")
        charge = self._record(
            idempotency_key=idempotency_key, amount=amount, description=description
        )
        if lost_roll < self.lost_response_rate:
            raise PartnerUnavailable(
                "read timed out waiting for the payment partner (the charge may have gone through)"
            )
        return charge

    def _record(self, *, idempotency_key: str, amount: Decimal, description: str) -> Charge:
        with transaction.atomic():
            row, created = PartnerCharge.objects.get_or_create(
                idempotency_key=idempotency_key,
                defaults={
                    "reference": f"ch_{secrets.token_hex(12)}",
                    "amount": amount,
                    "description": description[:200],
                },
            )
            if not created:
                if row.amount != amount:
                    raise IdempotencyKeyReused(
                        f"idempotency key {idempotency_key!r} was used for {row.amount}, "
                        f"not {amount}"
                    )
                PartnerCharge.objects.filter(pk=row.pk).update(requests=F("requests") + 1)
        return Charge(
            reference=row.reference,
            amount=row.amount,
            created_at=row.created_at,
            replayed=not created,
        )


def is_declined(*, amount: Decimal, description: str) -> bool:
    """Return True for the test-mode values the partner always declines."""
    cents = int((amount * 100) % 100)
    return cents == DECLINED_CENTS or DECLINED_ITEM in description


@functools.cache
def get_partner() -> PaymentPartner:
    """Return this process's partner, configured from ``settings.SHOP_PARTNER``."""
    options: dict[str, Any] = getattr(settings, "SHOP_PARTNER", {})
    return PaymentPartner(
        seed=options.get("SEED"),
        unavailable_rate=options.get("UNAVAILABLE_RATE", 0.25),
        lost_response_rate=options.get("LOST_RESPONSE_RATE", 0.05),
        busy_rate=options.get("BUSY_RATE", 0.10),
        busy_retry_after_seconds=options.get("BUSY_RETRY_AFTER_SECONDS", 0.5),
        latency_seconds=options.get("LATENCY_SECONDS", 0.02),
    )


@receiver(setting_changed)
def _reset_partner(*, setting: str, **kwargs: Any) -> None:
    # override_settings(SHOP_PARTNER=...) in tests must reach the next get_partner() call.
    if setting == "SHOP_PARTNER":
        get_partner.cache_clear()
