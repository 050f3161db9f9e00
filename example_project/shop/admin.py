"""Admin for orders and the stand-in partner's ledger."""

from django.contrib import admin

from .models import Order, PartnerCharge


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    """Orders, with the progress their jobs made."""

    list_display = (
        "id",
        "customer_email",
        "item",
        "amount",
        "created_at",
        "receipt_sent_at",
        "charged_at",
        "charge_reference",
    )
    list_filter = ("created_at",)
    search_fields = ("customer_email", "item", "charge_reference")
    date_hierarchy = "created_at"


@admin.register(PartnerCharge)
class PartnerChargeAdmin(admin.ModelAdmin):
    """The partner's ledger: one row per idempotency key, read-only."""

    list_display = ("reference", "idempotency_key", "amount", "requests", "created_at")
    search_fields = ("reference", "idempotency_key", "description")

    def has_add_permission(self, request):
        """Refuse: only the partner writes its ledger."""
        return False

    def has_change_permission(self, request, obj=None):
        """Refuse: a ledger row is history."""
        return False
