"""The shop: orders, the jobs they trigger, and the demo commands."""
