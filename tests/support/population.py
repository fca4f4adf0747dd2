"""A queue with jobs in every state, and hostile objects in every prefix.

The operator tests (API, CLI, dashboard in Chromium) all read this same
population, built with the runtime itself on a real store, plus objects that
other writers make: zero-byte folder markers, a non-JSON body, pailq 0.1.1's
``NaN`` bodies, and a key that is HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pail import Pail, SystemClock
from pail.protocol.claim import Claimer

HOLDER = "worker-7:4242"
HTML_ID = "<img src=x onerror=alert(1)>"
NAN_ID = "NANJOB00000000000000000000"
GARBAGE_ID = "GARBAGE0000000000000000000"


@dataclass
class Population:
    """The ids of the jobs in each state, and the foreign keys written."""

    pending: list[str] = field(default_factory=list)
    retrying: str = ""
    delayed: str = ""
    running: str = ""
    done: list[str] = field(default_factory=list)
    dead: str = ""
    cancelled: str = ""
    foreign_keys: list[str] = field(default_factory=list)


def _boom(payload: Any) -> Any:
    raise RuntimeError(f"report {payload.get('report')} failed: upstream timed out")


def _render(payload: Any) -> Any:
    return {"pages": 12, "report": payload.get("report")}


def populate(pail: Pail, *, hostile: bool = True) -> Population:
    """Fill ``pail``'s queue: 2 done, 1 dead, 1 cancelled, 1 running (with progress),
    1 pending retry with its error, 2 pending, 1 delayed; and, with ``hostile``,
    foreign objects under every prefix."""
    found = Population()
    strict = Pail(pail.store, queue=pail.keys.namespace, max_retries=0)
    for report in ("q1", "q2"):
        job_id = pail.enqueue({"report": report})
        assert pail.work_once(_render)
        found.done.append(job_id)
    found.dead = strict.enqueue({"report": "q3-poison"})
    assert strict.work_once(_boom)
    found.cancelled = pail.enqueue({"report": "q4"})
    assert pail.cancel(found.cancelled)
    # The running job: claimed by a worker that renews no more (no heartbeat
    # thread), with progress recorded in its lease.
    found.running = pail.enqueue({"report": "q5-long"})
    claimer = Claimer(
        pail.store, pail.keys, visibility_timeout=3600, clock=SystemClock(), owner=HOLDER
    )
    lease = claimer.claim()
    assert lease is not None and lease.job_id == found.running
    lease.set_progress({"done": 3, "total": 8, "message": "rendering charts"})
    lease.renew()
    found.retrying = pail.enqueue({"report": "q6-flaky"})
    assert pail.work_once(_boom)  # attempt 1 fails; it waits for attempt 2
    found.pending = [pail.enqueue({"report": f"q{n}"}) for n in (7, 8)]
    found.delayed = pail.enqueue({"report": "q9-later"}, delay=3600)
    if hostile:
        found.foreign_keys = write_hostile(pail)
    # work_once leaves its lease removal in flight: let the done jobs' leases go.
    pail.flush()
    strict.flush()
    return found


def write_hostile(pail: Pail) -> list[str]:
    """Foreign objects in every prefix; returns their keys."""
    keys = pail.keys
    objects: dict[str, bytes] = {
        keys.prefix("queue/"): b"",  # S3 console folder markers
        keys.prefix("run/"): b"",
        keys.prefix("done/") + "photos/": b"",
        keys.prefix("dlq/"): b"",
        # pailq 0.1.1 writes NaN as NaN: valid for Python's json, not for JSON.
        keys.dlq(NAN_ID): b'{"payload": {"x": NaN}, "attempts": NaN, "error": "boom"}',
        keys.run(NAN_ID): b'{"payload": {"x": NaN}, "attempts": NaN}',
        keys.dlq(GARBAGE_ID): b"\xff\xfe not json at all <b>bold</b>",
        keys.dlq(HTML_ID): b'{"payload": "<script>alert(1)</script>", "attempts": 1}',
        keys.prefix("queue/") + "photos/cat.jpg": b"\x89PNG\r\n",
    }
    for key, body in objects.items():
        pail.store.put(key, body, content_type="application/octet-stream")
    return list(objects)
