"""Internal: maintenance."""
