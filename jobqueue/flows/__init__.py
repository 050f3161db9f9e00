"""Internal: flows."""
