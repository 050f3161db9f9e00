"""Internal: ``enqueue``'s ``after=`` options, checked (no SQL); the store does the rest.

``after`` names the parents a job waits for (``jobqueue/store/interface.py`` has the rules); the
job starts ``waiting`` and is made ready in the transaction that records its last parent's
success. ``run_on_parent_failure`` makes a dead or cancelled parent count as done instead of
cancelling the job. ``takes_parent_results`` hands it its parents' results, in the order of
``after``, as the payload key ``parent_results`` (a list), filled in when it is released: the
handler takes a ``parent_results`` argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction

from jobqueue import arguments
from jobqueue.errors import InvalidJobOption
from jobqueue.registry import PARENT_OPTIONS
from jobqueue.store import NewJob, Store
from jobqueue.store.interface import PARENT_RESULTS_KEY

__all__ = [
    "MAX_PARENTS",
    "PARENT_RESULTS_KEY",
    "ParentOptions",
    "enqueue_each",
    "parent_options",
    "split_specs",
]


#: Most parents one job may wait for (one edge row each, written in the enqueue's transaction).
MAX_PARENTS = 1000


class ParentOptions:
    """``after=`` and its flags, checked: ``after`` distinct ids in the caller's order."""

    __slots__ = ("after", "run_on_parent_failure", "takes_parent_results")

    def __init__(
        self, after: tuple[int, ...], run_on_parent_failure: bool, takes_parent_results: bool
    ) -> None:
        self.after = after
        self.run_on_parent_failure = run_on_parent_failure
        self.takes_parent_results = takes_parent_results

    def payload(self, payload: dict[str, Any] | None) -> dict[str, Any] | None:
        """Return ``payload`` with a placeholder ``parent_results`` (the handler must take it).

        The placeholder lets enqueue check the handler's signature now; the release replaces it.
        """
        if not self.takes_parent_results or not isinstance(payload, dict | None):
            return payload
        return {**(payload or {}), PARENT_RESULTS_KEY: []}


def parent_options(
    after: Iterable[int] | None,
    *,
    run_on_parent_failure: Any = False,
    takes_parent_results: Any = False,
    dedupe_key: str | None = None,
) -> ParentOptions | None:
    """Check ``enqueue``'s parent options; return them, or None for a job without parents.

    Raises:
        InvalidJobOption: ``after`` is not an iterable of job ids (a string is refused), is
            empty, repeats an id or has more than :data:`MAX_PARENTS`; a flag is not a bool; a
            flag or a ``dedupe_key`` is given with no ``after`` or with it (a waiting job holds
            no dedupe key).
    """
    for name, flag in (
        ("run_on_parent_failure", run_on_parent_failure),
        ("takes_parent_results", takes_parent_results),
    ):
        if not isinstance(flag, bool):
            raise InvalidJobOption(name, f"must be True or False, got {flag!r:.100}")
        if flag and after is None:
            raise InvalidJobOption(name, "needs after=[job ids]")
    if after is None:
        return None
    if isinstance(after, str | bytes) or not isinstance(after, Iterable):
        raise InvalidJobOption("after", f"must be a list of job ids, got {after!r:.100}")
    ids = list(after)
    bad = [value for value in ids if not arguments.is_job_id(value)]
    if bad:
        raise InvalidJobOption("after", f"{bad[0]!r:.100} is not a job id (an int >= 1)")
    if not ids:
        raise InvalidJobOption("after", "must name at least one job (None: no parents)")
    if len(set(ids)) != len(ids):
        raise InvalidJobOption("after", f"names a job twice: {ids!r:.200}")
    if len(ids) > MAX_PARENTS:
        raise InvalidJobOption("after", f"names {len(ids)} jobs; at most {MAX_PARENTS}")
    if dedupe_key is not None:
        raise InvalidJobOption(
            "dedupe_key",
            "cannot be combined with after=: a waiting job holds no dedupe key (the live-key "
            "index covers ready, scheduled and leased jobs only), so it would keep no duplicate "
            "out; dedupe the parent instead (docs/decisions.md, 'Jobs that run after other jobs')",
        )
    return ParentOptions(tuple(ids), run_on_parent_failure, takes_parent_results)


def split_specs(
    specs: Iterable[Any],
) -> tuple[list[Any], list[ParentOptions | None]]:
    """Split ``enqueue_many``'s jobs into jobs without parent keys and their parent options.

    A job that is not a mapping is passed on as it is (``new_jobs`` refuses it, naming it).

    Raises:
        InvalidJobOption: a job's parent options are bad; ``option`` is ``jobs[<index>].<key>``.
    """
    if isinstance(specs, Mapping | str | bytes) or not isinstance(specs, Iterable):
        raise InvalidJobOption("jobs", f"must be an iterable of job dicts, got {specs!r:.100}")
    rest: list[Any] = []
    options: list[ParentOptions | None] = []
    for index, spec in enumerate(specs):
        if not isinstance(spec, Mapping) or not any(key in spec for key in PARENT_OPTIONS):
            rest.append(spec)
            options.append(None)
            continue
        try:
            found = parent_options(
                spec.get("after"),
                run_on_parent_failure=spec.get("run_on_parent_failure", False),
                takes_parent_results=spec.get("takes_parent_results", False),
                dedupe_key=spec.get("dedupe_key"),
            )
        except InvalidJobOption as exc:
            raise InvalidJobOption(f"jobs[{index}].{exc.option}", exc.problem) from None
        plain = {k: v for k, v in spec.items() if k not in PARENT_OPTIONS}
        if found is not None:
            plain["payload"] = found.payload(plain.get("payload"))
        rest.append(plain)
        options.append(found)
    return rest, options


def enqueue_each(
    store: Store, jobs: list[NewJob], parents: list[ParentOptions | None]
) -> list[tuple[int, bool]]:
    """Enqueue ``jobs`` one by one, all or nothing: ``enqueue_many`` where some have ``after``.

    Returns:
        ``(job_id, created)`` per job, in order, as ``Store.enqueue_many``.

    Raises:
        InvalidJobOption: a parent id names no job; nothing was written.
    """
    results: list[tuple[int, bool]] = []
    with transaction.atomic(using=store.alias):
        for job, options in zip(jobs, parents, strict=True):
            if options is None:
                results.append(store.enqueue_or_get(job))
                continue
            job_id, _ = store.enqueue_after(
                job,
                options.after,
                run_on_parent_failure=options.run_on_parent_failure,
                takes_parent_results=options.takes_parent_results,
            )
            results.append((job_id, True))
    return results
