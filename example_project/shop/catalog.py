"""What the shop sells, and plausible random orders for demos and load tests."""

from __future__ import annotations

import random
from decimal import Decimal

from .partner import DECLINED_ITEM

#: Item slug -> unit price in EUR.
CATALOG: dict[str, Decimal] = {
    "house-espresso-250g": Decimal("9.50"),
    "ethiopia-yirgacheffe-250g": Decimal("12.90"),
    "colombia-huila-1kg": Decimal("38.00"),
    "decaf-swiss-water-250g": Decimal("10.40"),
    "hand-grinder": Decimal("64.00"),
    "pour-over-kit": Decimal("42.00"),
    "gift-card": Decimal("25.00"),
    "monthly-subscription": Decimal("29.00"),
}

_FIRST_NAMES = ("ada", "grace", "linus", "margaret", "ken", "barbara", "guido", "radia", "alan")
_DOMAINS = ("example.com", "example.org", "example.net")


def item_choices() -> list[tuple[str, str]]:
    """Return ``(slug, label)`` pairs for a form's select box."""
    return [(slug, f"{slug} ({price} EUR)") for slug, price in CATALOG.items()]


def random_order(rng: random.Random) -> dict[str, object]:
    """Return the fields of a plausible order: keyword arguments for ``place_order``.

    About one order in 50 uses the ``declined-card`` test item, which the partner's test mode
    declines for good, so a demo shows permanent failures next to transient ones.
    """
    name = rng.choice(_FIRST_NAMES)
    email = f"{name}.{rng.randrange(1, 10_000)}@{rng.choice(_DOMAINS)}"
    if rng.random() < 0.02:
        return {"customer_email": email, "item": DECLINED_ITEM, "amount": Decimal("5.00")}
    item = rng.choice(list(CATALOG))
    quantity = rng.choices((1, 2, 3), weights=(80, 15, 5))[0]
    return {"customer_email": email, "item": item, "amount": CATALOG[item] * quantity}
