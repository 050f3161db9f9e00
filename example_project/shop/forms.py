"""The order form."""

from __future__ import annotations

from decimal import Decimal

from django import forms

from .catalog import CATALOG, item_choices


class OrderForm(forms.Form):
    """Order one catalog item, one to five times."""

    customer_email = forms.EmailField(label="E-mail")
    item = forms.ChoiceField(choices=item_choices)
    quantity = forms.IntegerField(min_value=1, max_value=5, initial=1)

    def to_order(self) -> dict[str, object]:
        """Return keyword arguments for ``place_order`` from the cleaned data."""
        item = self.cleaned_data["item"]
        amount: Decimal = CATALOG[item] * self.cleaned_data["quantity"]
        return {
            "customer_email": self.cleaned_data["customer_email"],
            "item": item,
            "amount": amount,
        }
