"""SoloGate: a suspect job (its process died beside others) always runs alone in its process."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from jobqueue.store import ClaimedJob
from jobqueue.worker.solo import SoloGate

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc


def job(job_id: int, *, suspect: bool = False) -> ClaimedJob:
    return ClaimedJob(
        id=job_id,
        job_type="t",
        payload={},
        attempt=1,
        max_attempts=3,
        timeout_s=30.0,
        lease_token=uuid.uuid4(),
        lease_until=datetime(2030, 1, 1, tzinfo=UTC),
        queue="q",
        priority=0,
        tenant_id="",
        suspect=suspect,
    )


def test_without_suspects_everything_starts_and_claims_are_full_size():
    gate = SoloGate()
    batch = [job(1), job(2)]
    assert gate.admit(batch, running=set()) == (batch, [])
    assert gate.claim_size(4, running={1, 2}) == 4


def test_a_suspect_claimed_by_an_empty_worker_starts_alone_and_blocks_claims_until_done():
    gate = SoloGate()
    a, s, b = job(1), job(2, suspect=True), job(3)
    assert gate.admit([a, s, b], running=set()) == ([s], [a, b])
    assert gate.claim_size(3, running={2}) == 0
    assert gate.claim_size(4, running=set()) == 4  # done: back to normal


def test_a_suspect_claimed_beside_running_jobs_is_given_back_until_the_worker_is_empty():
    gate = SoloGate()
    a, s = job(1), job(2, suspect=True)
    assert gate.admit([a, s], running={9}) == ([a], [s])
    assert gate.claim_size(2, running={9, 1}) == 0
    assert gate.claim_size(3, running={1}) == 0
    assert gate.claim_size(4, running=set()) == 1  # one job: likely the suspect
    assert gate.admit([s], running=set()) == ([s], [])
    assert gate.claim_size(3, running={2}) == 0
