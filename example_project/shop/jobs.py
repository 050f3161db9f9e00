"""The shop's background jobs. jobqueue imports this module at startup (autodiscovery).

Both jobs are safe to run twice: delivery is at least once, so each one first checks whether
its work is already done, and the charge carries an idempotency key to the partner.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.utils import timezone

from jobqueue import JobContext, job
from jobqueue.errors import PermanentError, RetryAfter

from . import partner
from .models import Order

logger = logging.getLogger(__name__)


# Names are explicit and short: they are stored in every job row, so they must outlive a move
# of the function to another module.
@job(name="shop.send_receipt", queue="emails", max_attempts=5)
def send_receipt(order_id: int) -> dict[str, Any]:
    """E-mail the customer a receipt for the order, once.

    Args:
        order_id: the order's primary key.

    Returns:
        Where the receipt went, stored as the job's result.

    Raises:
        PermanentError: the order does not exist (it was deleted after the job was enqueued).
    """
    order = _get_order(order_id)
    if order.receipt_sent_at is not None:
        # An earlier run sent it and then lost its lease or crashed before the ack.
        return {"sent_to": order.customer_email, "already_sent": True}
    body = render_to_string("shop/receipt.txt", {"order": order, "shop_name": settings.SHOP_NAME})
    send_mail(
        # rundemo reads the order id back from the end of the subject.
        f"Your {settings.SHOP_NAME} receipt for order #{order.pk}",
        body,
        None,  # DEFAULT_FROM_EMAIL
        [order.customer_email],
    )
    Order.objects.filter(pk=order.pk, receipt_sent_at__isnull=True).update(
        receipt_sent_at=timezone.now()
    )
    return {"sent_to": order.customer_email, "already_sent": False}


@job(
    name="shop.charge_partner",
    queue="default",
    max_attempts=4,
    # The partner recovers within a second or two; a shopper is waiting for the confirmation.
    backoff={"policy": "full", "base_seconds": 0.2, "cap_seconds": 2},
    takes_context=True,
)
def charge_partner(ctx: JobContext, order_id: int) -> dict[str, Any]:
    """Charge the order's amount at the payment partner, once.

    The job id (``ctx.idempotency_key``) is the partner's idempotency key: it is the same on
    every attempt, so a retry after a lost response finds the first charge instead of charging
    again.

    Args:
        ctx: this run's context.
        order_id: the order's primary key.

    Returns:
        The partner's charge reference, stored as the job's result.

    Raises:
        PermanentError: the order is gone, or the partner declined the charge.
        RetryAfter: the partner asked us to come back later.
        PartnerUnavailable: the partner could not be reached; retried with backoff.
    """
    order = _get_order(order_id)
    if order.charged_at is not None:
        return {"reference": order.charge_reference, "replayed": True}
    if ctx.lease_lost:
        # Another worker owns this job now; let it make the call.
        logger.warning("job %s: lease lost before charging order %s", ctx.job_id, order.pk)
        return {"reference": "", "skipped": "lease lost"}
    try:
        charge = partner.get_partner().charge(
            idempotency_key=ctx.idempotency_key,
            amount=order.amount,
            description=f"{settings.SHOP_NAME} order #{order.pk}: {order.item}",
        )
    except partner.PartnerBusy as exc:
        raise RetryAfter(exc.retry_after_seconds) from exc
    except (partner.CardDeclined, partner.IdempotencyKeyReused) as exc:
        raise PermanentError(f"order {order.pk}: {exc}") from exc
    # PartnerUnavailable propagates: an ordinary error, retried with backoff.
    Order.objects.filter(pk=order.pk, charged_at__isnull=True).update(
        charged_at=charge.created_at, charge_reference=charge.reference
    )
    if charge.replayed:
        logger.info(
            "order %s: partner replayed charge %s (attempt %s)",
            order.pk,
            charge.reference,
            ctx.attempt,
        )
    return {"reference": charge.reference, "replayed": charge.replayed}


def _get_order(order_id: int) -> Order:
    try:
        return Order.objects.get(pk=order_id)
    except Order.DoesNotExist:
        raise PermanentError(f"order {order_id} does not exist") from None
