"""One worker's overlapped requests: what a job need not wait for, and how much of it at once.

A job's requests were strictly one after another. Three of them depend on
nothing the next one needs (``docs/protocol.md``, "The order of a job's
requests"):

* the claim's DELETE of the entry and its HEAD of ``done/{id}`` both follow
  the lease write and not each other: ``both`` sends them at once and returns
  only when **both** answered, so the handler never starts before the
  DELETE's outcome is known;
* the removal of the lease once ``done/{id}`` is written decides nothing (the
  outcome is decided; a crash before the removal is repaired by the reaper,
  which finds ``done/``): ``later`` sends it in the background, retried, and
  logged if it never lands;
* the next candidate's GET can travel while the result is written:
  ``ahead`` starts a read whose answer is taken later, or never.

``Threads`` does this with one small pool per worker thread
(``config.OVERLAP_THREADS`` threads): a worker has at most that many
requests in flight beside its own and its heartbeat's, and a full pool makes
the caller wait (nothing queues without bound). ``flush`` waits for what is
still in flight: every entry point but ``work_once`` calls it before it
returns (a Lambda freezes after it returns). ``Sequential`` runs everything
in the caller, one request after another: the order pail had before.

**At interpreter exit** the pools' threads are daemons, and an ``atexit``
hook waits for what is still in flight at most ``FLUSH_TIMEOUT`` seconds in
all (the bound every entry point's flush has): a ``work_once`` caller's last
lease removal still lands, but one stuck on an endpoint that never answers
no longer holds the process for botocore's whole timeouts (pail's client: 5
tries of 20 s, each of the 3 background tries). What is abandoned there the
reaper repairs, as for any lost background request.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_all
from typing import Any, Protocol

from pail.errors import PailError, StorageError

log = logging.getLogger("pail")


LATER_TRIES = 3
"""Tries of a background request (each after botocore's own retries) before it is left to the reaper."""
LATER_BACKOFF = 0.2
"""Seconds before the second try of a background request; doubled before each later one."""
FLUSH_TIMEOUT = 3.0
"""Seconds an entry point waits for background requests before it returns (each takes one round trip)."""


class Answer[T]:
    """A request's answer, or the error it raised: read with ``get``."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: T | None = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    @classmethod
    def of(cls, call: Callable[[], T]) -> Answer[T]:
        """Run ``call`` now and keep what it returned or raised."""
        try:
            return cls(call())
        except Exception as exc:  # noqa: BLE001 - kept, and raised again by get()
            return cls(error=exc)

    def get(self) -> T:
        """The answer; raises the request's error if it raised one."""
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


class Ahead[T](Protocol):
    """A read under way: its answer is taken later, or never."""

    def get(self) -> T:
        """Wait for the answer; raises the request's error if it raised one."""
        ...


class Overlap(Protocol):
    """How a worker overlaps the requests of a job that do not wait for each other."""

    def both[T, U](
        self, first: Callable[[], T], second: Callable[[], U]
    ) -> tuple[Answer[T], Answer[U]]:
        """Run ``first`` and ``second`` at once; return both answers once **both** ended."""
        ...

    def ahead[T](self, call: Callable[[], T]) -> Ahead[T]:
        """Start ``call`` now; its answer is read later (or never)."""
        ...

    def later(self, what: str, call: Callable[[], object]) -> None:
        """Run ``call`` in the background, retried on storage errors; logged if it never lands.

        ``what`` names it in the log. Only for a request whose loss the reaper
        repairs: nobody waits for it.
        """
        ...

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait for everything started so far; True if nothing is left in flight."""
        ...


def retried(what: str, call: Callable[[], object], sleep: Callable[[float], None]) -> bool:
    """Run a background request up to ``LATER_TRIES`` times; True once it landed.

    A request that still fails is logged, never raised: nobody waits for it,
    and what it would have done the reaper does (``Overlap.later``).
    """
    pause = LATER_BACKOFF
    for attempt in range(1, LATER_TRIES + 1):
        try:
            call()
            return True
        except StorageError as exc:
            if attempt == LATER_TRIES:
                log.warning("%s failed %d times (%s); the reaper will do it", what, attempt, exc)
                return False
            sleep(pause)
            pause *= 2
        except PailError as exc:  # a refusal (access denied): retrying cannot help
            log.warning("%s failed (%s); the reaper will do it", what, exc)
            return False
    return False


class Sequential:
    """Every request in the caller, one after another: no concurrency at all."""

    def both[T, U](
        self, first: Callable[[], T], second: Callable[[], U]
    ) -> tuple[Answer[T], Answer[U]]:
        return Answer.of(first), Answer.of(second)

    def ahead[T](self, call: Callable[[], T]) -> Ahead[T]:
        return Answer.of(call)

    def later(self, what: str, call: Callable[[], object]) -> None:
        retried(what, call, time.sleep)

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        return True


SEQUENTIAL = Sequential()


class _Pending[T]:
    """``Ahead`` over a future of the pool."""

    __slots__ = ("_future",)

    def __init__(self, future: Future[T]) -> None:
        self._future = future

    def get(self) -> T:
        return self._future.result()


_Work = tuple[Future[Any], Callable[[], Any]] | None
"""A call for a pool thread and the future of its answer; None tells the thread to end."""


def _serve(work: queue.SimpleQueue[_Work]) -> None:
    """A pool thread: run the calls it is given until told to end (the pool was collected)."""
    while (item := work.get()) is not None:
        future, call = item
        if not future.set_running_or_notify_cancel():
            continue
        try:
            result = call()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the future
            future.set_exception(exc)
        else:
            future.set_result(result)
        del item, future, call  # hold nothing of a finished call while waiting for the next


def _end(work: queue.SimpleQueue[_Work], threads: int) -> None:
    for _ in range(threads):
        work.put(None)


_live: weakref.WeakSet[Threads] = weakref.WeakSet()


@atexit.register
def _flush_at_exit(timeout: float = FLUSH_TIMEOUT) -> bool:
    """Wait for every pool's requests in flight, ``timeout`` seconds in all; True if none is left."""
    deadline = time.monotonic() + timeout
    drained = True
    for pool in list(_live):
        drained = pool.flush(max(0.0, deadline - time.monotonic())) and drained
    return drained


class Threads:
    """``Overlap`` on a small thread pool of its own: one per worker thread.

    At most ``threads`` requests run in the pool at once; a call that would
    exceed it waits for a slot. The pool's threads are daemons made on first
    use; at interpreter exit, what is still running gets at most
    ``FLUSH_TIMEOUT`` seconds to land (module docstring), so a lease removal
    a ``work_once`` left in flight still lands, and a stuck one cannot hold
    the exit. The threads end when the pool is collected.

    >>> overlap = Threads(2)
    >>> [answer.get() for answer in overlap.both(lambda: 1, lambda: 2)]
    [1, 2]
    >>> overlap.flush()
    True
    """

    def __init__(self, threads: int, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._threads = max(1, threads)
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(self._threads)
        self._lock = threading.Lock()
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._started = 0
        self._running: set[Future[object]] = set()
        weakref.finalize(self, _end, self._work, self._threads)
        _live.add(self)

    def both[T, U](
        self, first: Callable[[], T], second: Callable[[], U]
    ) -> tuple[Answer[T], Answer[U]]:
        future = self._submit(lambda: Answer.of(second))
        answer = Answer.of(first)
        return answer, future.result()

    def ahead[T](self, call: Callable[[], T]) -> Ahead[T]:
        return _Pending(self._submit(call))

    def later(self, what: str, call: Callable[[], object]) -> None:
        self._submit(lambda: retried(what, call, self._sleep))

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        with self._lock:
            running = set(self._running)
        if not running:
            return True
        _, left = wait_all(running, timeout=timeout)
        if left:
            log.warning(
                "%d background request(s) still in flight after %.1f s; the reaper repairs "
                "what they would have done",
                len(left),
                timeout,
            )
        return not left

    def _submit[T](self, call: Callable[[], T]) -> Future[T]:
        self._slots.acquire()  # a full pool makes the caller wait: bounded in flight
        try:
            future: Future[T] = Future()
            with self._lock:
                if self._started < min(self._threads, len(self._running) + 1):
                    # One more thread while every one is busy: at most ``threads``, as the slots.
                    self._started += 1
                    threading.Thread(
                        target=_serve,
                        args=(self._work,),
                        name=f"pail-overlap_{self._started - 1}",
                        daemon=True,
                    ).start()
                self._running.add(future)  # type: ignore[arg-type]
            self._work.put((future, call))
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(self._finished)  # type: ignore[arg-type]
        return future

    def _finished(self, future: Future[object]) -> None:
        with self._lock:
            self._running.discard(future)
        self._slots.release()
