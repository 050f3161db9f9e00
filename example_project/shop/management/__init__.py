"""Management commands of the shop."""
