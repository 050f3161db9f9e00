"""The backend for Django's tasks framework (``django.tasks``, Django 6.0+).

Named in ``TASKS`` by its public path, ``jobqueue.backends.JobQueueBackend`` (the settings
example is there), it runs code written against Django's standard API on jobqueue's workers.
A task is stored as a job whose type is the task's module path (``shop.tasks.send_receipt``) and
whose payload is ``{"args": [...], "kwargs": {...}, "backend": alias, "run_after": iso|None}``,
plus ``"task_options"`` when the task sets jobqueue's own options (so a result reads back the
task as enqueued).
Workers find the task by importing that path, run it with Django's ``TaskContext``, and send
Django's ``task_started`` and ``task_finished`` signals. Retries, timeouts and dead letters are
jobqueue's: ``max_attempts``, ``timeout_s`` and ``backoff`` come from the task
(``@task(max_attempts=...)``), then ``OPTIONS``, then the ``JOBQUEUE`` setting.

The parts, one job each: ``options`` (``JobQueueTask`` and the ``TASKS`` entry), ``backend``
(``JobQueueBackend`` and the job type of a task), ``results`` (jobs as ``TaskResult``) and
``runner`` (one task run inside a worker). ``jobqueue.backends`` is the public path and
re-exports the public names.

This ``__init__`` imports nothing, and must stay so: ``ready()`` imports every installed app's
``tasks`` module (``JOBQUEUE["DISCOVER_MODULES"]``), this package included, and on Django 5.2
(no ``django.tasks``) that import must succeed; only the modules inside need ``django.tasks``.
"""
