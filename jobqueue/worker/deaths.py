"""Internal: hand back the leases of a worker process that died under the supervisor.

Without this, a dead process's leases run out (``LEASE_SECONDS``) and the reaper charges an
attempt to every job the process held, so a job that kills its process burns the attempts of the
innocent jobs beside it. The supervisor sees the death at once (``waitpid``) and knows the dead
process's worker id, so it has the leases handed back at once instead:

* a process that held one job: that job is charged (it killed its process, or died with it
  alone), retried after its backoff or dead-lettered when its attempts are spent;
* a process that held several: none is charged; each goes back to ``ready`` marked *suspect*
  and next runs alone (``jobqueue/worker/solo.py``), which finds the culprit.

The supervisor itself stays off the database: it forks a short-lived process that calls
:func:`hand_back_leases` (``Supervisor.hand_back``), and restarts the slot only after it ended.
A lease whose process died with no supervisor to see it (the host lost, the supervisor killed
too) still expires and is charged, as before. Decision: docs/decisions.md, "Stops and process
deaths".
"""

from __future__ import annotations

import logging

from django.db import connections
from django.db.models import BigIntegerField, TextField, Value
from django.db.models.functions import Cast, Now

from jobqueue.maintenance.reaper import charge_by_type
from jobqueue.models.metrics import DEATHS_PREFIX, GaugeSnapshot
from jobqueue.store import get_store
from jobqueue.store.interface import HandBack

logger = logging.getLogger("jobqueue.supervisor")


def hand_back_leases(worker_id: str, using: str = "default", cause: str = "") -> HandBack:
    """Hand back the leases of the dead worker process ``worker_id``; return what was done.

    Its Worker row goes too, as at a clean exit: the supervisor saw it die, so the dashboard,
    ``jobqueue status`` and ``health`` must not count it as a silent worker for the hour the
    row pruner would take.

    Args:
        worker_id: the id the dead process held its leases under. No live process may use it
            (the supervisor restarts the slot only after this returns).
        using: database alias of the queue.
        cause: why it died (``"SIGKILL"``, ``"OOM"``, ``"exit status 1"``:
            ``jobqueue.worker.causes``); each handed-back job's error entry says so.

    Returns:
        The counts of refunded, retried, dead and cancelled jobs.

    Raises:
        django.db.DatabaseError: the database could not be reached; the leases then expire and
            are charged as before.
    """
    store = get_store(using)
    try:
        # The one rule (``retries.decide``), with each job type's backoff.
        done = store.hand_back(worker_id, charge_by_type, cause=cause)
        store.deregister_worker(worker_id)
    finally:
        connections[using].close()
    if done != HandBack():
        logger.warning(
            "worker %s died: %d job(s) handed back uncharged (suspect: each runs alone next), "
            "%d charged and retried, %d charged and dead, %d cancelled",
            worker_id,
            done.refunded,
            done.retried,
            done.dead,
            done.cancelled,
        )
    return done


def count_death(cause: str, using: str = "default") -> None:
    """Count one death of a supervised worker process by ``cause``, where the metrics read it.

    Run by the supervisor's short-lived hand-back process (the supervisor itself touches no
    database); one small row per cause (``GaugeSnapshot`` named ``deaths:<cause>``), read as
    ``jobqueue_worker_process_deaths_total{cause=...}``: the whole cluster's count.

    Args:
        cause: ``"SIGKILL"``, ``"OOM"``, ``"exit status 1"``... (``jobqueue.worker.causes``).
        using: database alias of the queue.

    Raises:
        django.db.DatabaseError: the database could not be reached (the death is then only
            in the supervisor's log).
    """
    name = f"{DEATHS_PREFIX}{cause}"[:100]
    rows = GaugeSnapshot.objects.using(using).filter(name=name)
    bump = Cast(Cast("body", BigIntegerField()) + Value(1), TextField())
    try:
        GaugeSnapshot.objects.using(using).get_or_create(name=name, defaults={"body": "0"})
        rows.update(body=bump, computed_at=Now())
    finally:
        connections[using].close()
