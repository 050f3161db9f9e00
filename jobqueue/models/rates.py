"""Internal: the ``RateBucket`` model (one rate limiter's token bucket), kept beside ``models.py``.

Import it from :mod:`jobqueue.models`. One row per limiter (``ratelimits.py`` names the keys:
``type:<name>``, ``dependency:<name>``, ``tenant:<id>``): the tokens it held at
``refreshed_at`` (database clock). The claim refills and spends them in its own statement
(``store/sql/claim.sql``); the rate and the burst live in the settings, not here, so changing a
limit needs no migration and takes effect at the workers' next start.
"""

from __future__ import annotations

from django.db import models


class RateBucket(models.Model):
    """A limiter's tokens as of its last refill. Only the store writes rows."""

    key = models.CharField(max_length=300, primary_key=True)
    tokens = models.FloatField(help_text="Tokens left at refreshed_at.")
    refreshed_at = models.DateTimeField(help_text="Last refill (database clock).")

    class Meta:
        db_table = "jobqueue_rate_limit"
        ordering = ["key"]
        verbose_name = "rate limit bucket"

    def __str__(self) -> str:
        return self.key
