"""``python -m jobqueue runworkers ...``: ``manage.py runworkers``, SIGTERM held from the start.

The entry point to give systemd or Kubernetes. It is ``manage.py`` for your project (any
command works; ``runworkers`` is the reason it exists), except that for ``runworkers`` its first
statement holds SIGTERM, before Django, your settings or any app is imported: a stop sent at any
moment of the worker's start-up then waits until the worker can handle it, and the process exits
0 having claimed nothing (``jobqueue.worker.stopping``). Under ``manage.py runworkers`` the hold
starts only when Django creates jobqueue's app config, so a SIGTERM during Django's import, your
settings' import or the apps listed before ``jobqueue`` still kills the process (status -15).

Run it where ``manage.py`` is (the current directory is on ``sys.path``, as for ``manage.py``),
with ``DJANGO_SETTINGS_MODULE`` set or ``--settings``: it cannot read ``manage.py``'s default.
"""

import importlib.util
import os
import sys

from jobqueue.worker.stopping import hold_stops_during_start_up

# First, before Django is imported: this is what the module is for.
hold_stops_during_start_up(sys.argv)

from django.core.management import execute_from_command_line  # noqa: E402  (after the hold)

#: The program name Django's usage and error messages show.
PROG = "python -m jobqueue"


def main(argv: list[str]) -> None:
    """Run the Django command ``argv[1:]`` names, as ``manage.py`` would.

    Args:
        argv: the command line (``sys.argv``): ``argv[1]`` is the command, then its flags.

    Raises:
        SystemExit: status 1 with a message when no settings module is named (neither
            ``DJANGO_SETTINGS_MODULE`` nor ``--settings``) or when it cannot be imported from
            here (unless ``--pythonpath`` is given); else as the command exits.
    """
    settings = _settings_module(argv)
    if not settings:
        sys.exit(
            f"{PROG}: no Django settings: set DJANGO_SETTINGS_MODULE (e.g. mysite.settings) "
            "or pass --settings, as manage.py does for you"
        )
    if not any(a.startswith("--pythonpath") for a in argv[1:]):
        try:
            found = importlib.util.find_spec(settings) is not None
        except ModuleNotFoundError:  # its package is not importable from here
            found = False
        if not found:
            sys.exit(
                f"{PROG}: cannot import the settings module {settings!r} from {os.getcwd()}: "
                "run it in the directory of manage.py, or put your project on PYTHONPATH"
            )
    execute_from_command_line([PROG, *argv[1:]])


def _settings_module(argv: list[str]) -> str:
    """Return the settings module ``--settings`` names (last one wins), else the environment's."""
    name = os.environ.get("DJANGO_SETTINGS_MODULE", "")
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "--settings" and i + 1 < len(argv):
            name = argv[i + 1]
        elif arg.startswith("--settings="):
            name = arg.split("=", 1)[1]
    return name


if __name__ == "__main__":
    main(sys.argv)
