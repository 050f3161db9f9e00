"""The shop's manage.py commands: place_orders, rundemo."""
