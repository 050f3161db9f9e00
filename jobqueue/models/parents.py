"""Internal: the ``JobParent`` model (one row per "run this job after that one").

Import it from :mod:`jobqueue.models`. ``enqueue(..., after=[...])`` writes one row per parent;
the store reads them when a parent finishes (``jobqueue/store/parents.py``). ``counted`` says the
parent's outcome was already taken off the child's ``waiting_for``, so an edge counts at most once
(a parent that ran anyway after a failure and is then retried and succeeds does not count twice).
No foreign keys: pruning deletes finished jobs without looking here, and an edge whose parent is
gone was counted or cancelled its child before the parent could finish and be pruned.
"""

from __future__ import annotations

from django.db import models


class JobParent(models.Model):
    """One parent of one waiting (or released) job."""

    id = models.BigAutoField(primary_key=True)
    parent_id = models.BigIntegerField()
    child_id = models.BigIntegerField()
    counted = models.BooleanField(
        default=False, help_text="The parent's outcome was taken off the child's waiting_for."
    )
    run_on_parent_failure = models.BooleanField(
        default=False, help_text="The child runs even if this parent ends dead or cancelled."
    )
    takes_parent_results = models.BooleanField(
        default=False, help_text="The child gets its parents' results as parent_results."
    )

    class Meta:
        verbose_name = "job parent"
        constraints = [
            # One edge per pair; also the index a finishing parent's children are found by.
            models.UniqueConstraint(fields=["parent_id", "child_id"], name="jobqueue_parent_edge")
        ]
        indexes = [models.Index(fields=["child_id", "parent_id"], name="jobqueue_parent_child")]

    def __str__(self) -> str:
        return f"#{self.child_id} after #{self.parent_id}"
