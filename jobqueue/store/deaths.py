"""Internal: the store's part in a worker process's death under the supervisor (hand_back).

The contract, kept by :class:`~jobqueue.store.postgres_deaths.PostgresDeathStore` and
:class:`~jobqueue.store.generic_deaths.GenericDeathStore` alike (tests/store/test_contract.py):

``hand_back(worker_id, decide) -> HandBack`` locks every job leased under ``worker_id`` (a process
that is known to be dead, so no one else holds these leases) and, in one transaction:

* if it held exactly one job, charges it: the run counts as an attempt, as an expired lease's
  does; ``decide(lease)`` says whether it is dead (attempts spent: reason ``attempts_exhausted``)
  or retried after ``delay_s``. Its error entry is ``process_died`` with ``charged: true``.
* if it held several, charges none of them: each goes back to ``ready`` now with its attempt
  refunded and ``suspect`` set, so that it next runs alone (``jobqueue/worker/solo.py``); its error
  entry is ``process_died`` with ``charged: false``.

A job whose cancel was requested ends ``cancelled`` either way. Each write is fenced on
``(id, lease_token, state = 'leased')``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Error message of a job charged for its process's death.
ALONE_MESSAGE = "its worker process died while running it alone; the attempt counts"
#: Error message of a job refunded because its process died while running several.
COMPANY_MESSAGE = (
    "its worker process died while running {n} jobs; the attempt is not counted and the job "
    "next runs alone"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HandBack:
    """What :meth:`hand_back` did with a dead worker process's leases.

    Attributes:
        refunded: jobs made ready (and suspect) with their attempt not counted.
        retried: the one job charged and scheduled for a retry (0 or 1).
        dead: the one job charged and dead-lettered (0 or 1).
        cancelled: jobs whose cancel was requested, now cancelled.
    """

    refunded: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0

    @classmethod
    def count(cls, states: list[str], *, company: bool) -> HandBack:
        """Return the counts of the jobs' new ``states`` after a hand-back (in ``company``)."""
        return cls(
            refunded=states.count("ready") if company else 0,
            retried=0 if company else states.count("scheduled"),
            dead=states.count("dead"),
            cancelled=states.count("cancelled"),
        )
