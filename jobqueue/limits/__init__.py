"""Internal: limits."""
