"""``pail.protocol.overlap.Overlap`` in the simulation: each overlapped request is an actor.

``Threads`` runs a worker's overlapped requests on a pool thread; here each
one is an actor of the worker's own process, so it travels, faults, crashes
and stalls with that process: a crash kills it with the worker, a stall
freezes it with the worker, and the scheduler interleaves it with everything
else. It shares its caller's phase (``World.phase``), so an aimed fault
counts its requests among the transition's and can strike either of two
concurrent ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pail.errors import PailError
from pail.protocol.overlap import Answer, retried
from tests.simulation.scheduler import Actor, Process

if TYPE_CHECKING:
    from tests.simulation.harness import World


_FOREVER = 1e9
OVERLAPPED = "/overlap"
"""The suffix of an overlapped request's actor name (``worker-3/overlap``)."""


class _Helper[T]:
    """One overlapped request under way in an actor; ``get`` waits for its answer."""

    def __init__(self, world: World, process: Process, call: Callable[[], T]) -> None:
        self._world = world
        self._answer: Answer[T] | None = None
        self._waiters: list[Actor] = []
        self._call = call
        parent = world.scheduler.current
        self.actor = world.scheduler.spawn(process, f"{process.name}{OVERLAPPED}", self._run)
        if parent is not None:
            world.share_phase(parent, self.actor)

    def _run(self) -> None:
        try:
            self._answer = Answer.of(self._call)
        finally:
            self._world.end_phase(self.actor)
            for waiter in self._waiters:
                self._world.scheduler.wake(waiter)

    @property
    def finished(self) -> bool:
        return self.actor.finished

    def get(self) -> T:
        scheduler = self._world.scheduler
        me = scheduler.current
        assert me is not None
        while self._answer is None:
            if self.actor.finished:  # killed (its process crashed): so is the caller, next sleep
                scheduler.sleep(0)
                continue
            self._waiters.append(me)
            scheduler.sleep(_FOREVER)
        return self._answer.get()


class SimOverlap:
    """A worker process's ``Overlap``: ``both``, ``ahead`` and ``later`` as actors of ``process``."""

    def __init__(self, world: World, process: Process) -> None:
        self._world = world
        self._process = process
        self._helpers: list[_Helper[object]] = []

    def both[T, U](
        self, first: Callable[[], T], second: Callable[[], U]
    ) -> tuple[Answer[T], Answer[U]]:
        helper = self._start(second)
        answer = Answer.of(first)
        return answer, Answer.of(helper.get)

    def ahead[T](self, call: Callable[[], T]) -> _Helper[T]:
        return self._start(call)

    def later(self, what: str, call: Callable[[], object]) -> None:
        world = self._world

        def run() -> None:
            if not retried(what, call, world.scheduler.sleep):
                world.counts["background_given_up"] += 1

        self._start(run)
        world.counts["background_requests"] += 1

    def flush(self, timeout: float = 0.0) -> bool:
        """Wait for every request started so far; as ``Threads.flush``, an error is not raised."""
        for helper in list(self._helpers):
            try:
                helper.get()
            except PailError as exc:
                self._world.ledger.note(
                    f"{self._process.name}: an overlapped request failed: {exc}"
                )
        return True

    def _start[T](self, call: Callable[[], T]) -> _Helper[T]:
        helper = _Helper(self._world, self._process, call)
        self._helpers = [h for h in self._helpers if not h.finished]
        self._helpers.append(helper)  # type: ignore[arg-type]
        return helper
