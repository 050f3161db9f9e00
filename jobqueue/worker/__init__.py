"""Internal: one worker process, in parts that each do one job.

* ``loop.py``: :class:`Worker`: registers, claims, starts jobs, waits, stops; :meth:`Worker.run`
  for a process, :meth:`Worker.run_once` for tests and embedding;
* ``starting.py``: jobs onto handler threads (each type resolved once per run); timeouts;
* ``completer.py``: outcomes taken, batched, written (one method writes them), signalled;
* ``maintenance/services.py``: the :class:`Service` protocol and the runner of services on a thread;
  ``heartbeat.py``, ``maintenance/reaper.py``, ``maintenance/pruning.py`` (worker rows): the
  worker's services;
* ``wakeups.py``: the claim loop's bell (outcomes, notifications, stops) and its timers;
* ``runs.py``: the runs a worker holds; ``stopping.py``: what stop signals mean, the stop flags,
  the stop held during start-up (``loop.release_runs`` gives leases back at exit);
  ``outage.py``: backing off a database that is down, and holding the reaper back after it.

``from jobqueue.worker.loop import default_worker_id
from jobqueue.worker.loop import Worker`` is the import the command, tests and
benchmarks use.
"""
