"""The capability probes: a few requests under a scratch prefix, cleaned up after.

Each probe tests one thing the protocol (``docs/protocol.md``, "What the
store must provide") relies on, in the way a server could get it wrong:
accepting a write it should refuse (an ignored condition) as much as
refusing one it should accept (an unimplemented header).
"""

from __future__ import annotations

from collections.abc import Callable

from pail.clock import Clock, SystemClock
from pail.doctor.report import DoctorReport, Outcome
from pail.errors import AccessDeniedError, ConditionFailedError, PailError
from pail.ids import new_token
from pail.keys import ALL_PREFIXES, Keys
from pail.store.base import Store

# An ETag no object has: the probes' "stale" compare-and-swap target.
STALE_ETAG = '"00000000000000000000000000000000"'
SKEW_WARNING = 2.0
"""Seconds of clock difference worth a warning: a ``delay`` counts from the producer's
clock and is judged by the server's (``Date`` has 1 s resolution; ``not_before`` is the server's alone)."""
# Names that sort differently in byte order and in most other orders
# (case-folded, natural, insertion, directory-tree): pail's own key shapes.
ORDER_NAMES = ("01JZ", "!0000000000000-Z", "7ZZZ", "01J0", "0~", "00")


def _body() -> bytes:
    return f'{{"pail-doctor": "{new_token()}"}}'.encode()


class Probes:
    """Runs the probes against ``store``, writing only under ``prefix``."""

    def __init__(
        self,
        store: Store,
        keys: Keys,
        prefix: str,
        report: DoctorReport,
        clock: Clock | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._store = store
        self._keys = keys
        self._prefix = prefix
        self._report = report
        self._written: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self._prefix}{name}"

    def _put(self, name: str, **conditions: object) -> str:
        key = self.key(name)
        self._written.add(key)
        return self._store.put(key, _body(), **conditions).etag  # type: ignore[arg-type]

    def _guard(self, name: str, probe: Callable[[], None]) -> None:
        """Run ``probe``; a storage error it did not expect fails the check, with the cause."""
        try:
            probe()
        except AccessDeniedError as exc:
            self._report.add(name, Outcome.FAIL, f"denied: {exc}")
        except PailError as exc:
            self._report.add(name, Outcome.FAIL, f"the server refused it: {exc}")

    def reach(self) -> bool:
        """The bucket answers a listing with these credentials."""
        try:
            self._store.list(self._prefix, max_keys=1)
        except PailError as exc:
            self._report.add("reach the bucket", Outcome.FAIL, str(exc))
            return False
        self._report.add("reach the bucket", Outcome.PASS, "a listing answered")
        return True

    def create_only(self) -> None:
        def probe() -> None:
            self._put("create", if_none_match=True)
            try:
                self._put("create", if_none_match=True)
            except ConditionFailedError:
                self._report.add(
                    "create-only PUT (If-None-Match: *)",
                    Outcome.PASS,
                    "a second create of the same key was refused (412)",
                )
                return
            self._report.add(
                "create-only PUT (If-None-Match: *)",
                Outcome.FAIL,
                "a second create-only PUT replaced the object: the server ignores If-None-Match",
            )

        self._guard("create-only PUT (If-None-Match: *)", probe)

    def compare_and_swap(self) -> None:
        name = "compare-and-swap PUT (If-Match)"

        def probe() -> None:
            first = self._put("cas")
            try:
                self._put("cas", if_match=STALE_ETAG)
            except ConditionFailedError:
                pass
            else:
                self._report.add(
                    name, Outcome.FAIL, "a PUT with a stale If-Match replaced the object"
                )
                return
            second = self._put("cas", if_match=first)
            if second == first:
                self._report.add(name, Outcome.FAIL, "a new body kept the same ETag")
                return
            self._report.add(
                name, Outcome.PASS, "a stale ETag was refused (412), the current one accepted"
            )

        self._guard(name, probe)

    def conditional_delete(self) -> None:
        name = "conditional DELETE (If-Match)"

        def probe() -> None:
            etag = self._put("delete")
            key = self.key("delete")
            try:
                self._store.delete(key, if_match=STALE_ETAG)
            except ConditionFailedError:
                pass
            else:
                gone = self._store.head(key) is None
                what = "deleted the object" if gone else "answered success"
                self._report.add(
                    name,
                    Outcome.FAIL,
                    f"a DELETE with a stale If-Match {what}: the server ignores If-Match on "
                    "DELETE, and a stale worker could remove another's lease",
                )
                return
            if self._store.head(key) is None:
                self._report.add(name, Outcome.FAIL, "a refused conditional DELETE deleted anyway")
                return
            self._store.delete(key, if_match=etag)
            if self._store.head(key) is not None:
                self._report.add(name, Outcome.FAIL, "a DELETE with the current ETag left it")
                return
            self._report.add(
                name, Outcome.PASS, "a stale ETag was refused (412), the current one deleted"
            )

        self._guard(name, probe)

    def missing_keys(self, prefixes: tuple[str, ...] = ALL_PREFIXES) -> None:
        """A missing key under each state prefix reads as missing (404), not forbidden (403)."""
        for state in prefixes:
            key = f"{self._keys.prefix(state)}pail-doctor-missing-{new_token()}"
            name = f"missing key under {self._keys.prefix(state)} reads 404"
            try:
                found = self._store.get(key)
            except AccessDeniedError as exc:
                self._report.add(
                    name,
                    Outcome.FAIL,
                    f"403 for a missing key: grant s3:ListBucket on this prefix, or pail reads "
                    f"'no such job' as an access error ({exc})",
                )
                continue
            except PailError as exc:
                self._report.add(name, Outcome.FAIL, str(exc))
                continue
            if found is not None:
                self._report.add(
                    name, Outcome.FAIL, f"a key that was never written answered: {key}"
                )
                continue
            self._report.add(name, Outcome.PASS, "404")

    def listing(self) -> None:
        name = "listing order and consistency"

        def probe() -> None:
            for label in ORDER_NAMES:
                self._put(f"order-{label}")
            page = self._store.list(self.key("order-"))
            listed = [item.key.removeprefix(self.key("order-")) for item in page.items]
            if sorted(listed) != sorted(ORDER_NAMES):
                missing = sorted(set(ORDER_NAMES) - set(listed))
                self._report.add(
                    name,
                    Outcome.FAIL,
                    f"a listing right after the writes missed {missing}: not read-after-write consistent",
                )
                return
            in_order = listed == sorted(ORDER_NAMES)
            after = self._store.list(self.key("order-"), start_after=self.key("order-01J0"))
            rest = [item.key.removeprefix(self.key("order-")) for item in after.items]
            if not self._store.ordered_listing:
                self._report.add(
                    name,
                    Outcome.PASS,
                    "consistent; unordered, as directory buckets are (claims pick among a page)",
                )
            elif not in_order:
                self._report.add(
                    name,
                    Outcome.WARN,
                    f"consistent, but not in byte order ({listed}): FIFO is approximate and "
                    "delayed jobs may wait past their due time",
                )
            elif rest != sorted(n for n in ORDER_NAMES if n > "01J0"):
                self._report.add(
                    name,
                    Outcome.WARN,
                    f"in byte order, but StartAfter returned {rest}: a page crowded with "
                    "delayed jobs is listed again from the start",
                )
            else:
                self._report.add(
                    name, Outcome.PASS, "consistent, in byte order, StartAfter honoured"
                )

        self._guard(name, probe)

    def clock(self) -> None:
        name = "server clock vs this machine"

        def probe() -> None:
            sent = self._clock.now()
            written = self._store.put(self.key("clock"), _body())
            self._written.add(self.key("clock"))
            answered = self._clock.now()
            local = sent + (answered - sent) / 2
            skew = (written.server_time - local).total_seconds()
            text = f"{skew:+.1f} s (the server's Date has 1 s resolution)"
            if abs(skew) > SKEW_WARNING + (answered - sent).total_seconds():
                self._report.add(
                    name,
                    Outcome.WARN,
                    f"{text}: leases are judged by the server's clock, but delays count from "
                    "the producer's, so they are off by as much",
                )
            else:
                self._report.add(name, Outcome.PASS, text)

        self._guard(name, probe)

    def clean_up(self) -> None:
        name = "clean up the scratch objects"
        left: list[str] = []
        for key in sorted(self._written):
            try:
                self._store.delete(key)
            except PailError:
                left.append(key)
        try:
            remaining = [item.key for item in self._store.list(self._prefix).items]
        except PailError:
            remaining = []
        left = sorted(set(left) | set(remaining))
        if left:
            self._report.add(name, Outcome.WARN, f"could not delete: {', '.join(left)}")
        else:
            self._report.add(name, Outcome.PASS, f"{len(self._written)} object(s) deleted")
