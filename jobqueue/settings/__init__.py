"""Internal: settings."""
