"""A model of S3's request-rate partitions, for the local S3 front (``pail_bench.front``).

What AWS documents, and what this model takes from it:

* A bucket's keys are served by partitions, each a range of keys. Each
  partition takes at least 3,500 PUT/COPY/POST/DELETE and 5,500 GET/HEAD
  requests per second; above that S3 answers ``503 Slow Down`` (not billed)
  until it has scaled. There is no limit to the number of partitions.
* Partitions are not made when a prefix is created: S3 splits a partition
  after it has seen a sustained high request rate on it, in the background.
  How long that takes is not documented (a comment on AWS's knowledge-center
  article, acknowledged by AWS, says 30 to 60 minutes).

What the model assumes where AWS says nothing:

* A partition is a range ``[lo, hi)`` of keys in one bucket; a new bucket is
  one partition. Its rates are token buckets that start full and hold one
  second of tokens (the burst).
* A LIST counts as a read, on the partition holding the key it starts at
  (its ``start-after`` or ``prefix``). Bucket-level requests (CreateBucket)
  are not throttled.
* A request that is throttled uses no tokens, but it counts as demand.
* Splitting: a partition whose demand (admitted or throttled, either class)
  reached ``hot_fraction`` of its rate in each of ``sustain_seconds``
  consecutive seconds is split in two at the median key of its recent
  demand, so each half took about half the load. Each half gets the full
  rates. A single key cannot be split. Partitions never merge.
* Time is not scaled: S3's minutes of sustained load become seconds here, so
  a run can show what a split does; the rates are scaled down (``Rates.aws``).

The model is plain logic with an injected clock; ``tests/bench`` checks it
without a server. ``PartitionPolicy`` is the front's policy over it.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pail_bench.front import FORWARD, Decision, S3Request

AWS_WRITES_PER_SECOND = 3500.0
AWS_READS_PER_SECOND = 5500.0
THROTTLE = Decision(throttle=True)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Rates:
    """Requests per second one partition takes, by class."""

    writes: float
    reads: float

    @classmethod
    def aws(cls, scale: float = 1.0) -> Rates:
        """AWS's documented per-partition rates divided by ``scale``.

        >>> Rates.aws(1000)
        Rates(writes=3.5, reads=5.5)
        """
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        return cls(AWS_WRITES_PER_SECOND / scale, AWS_READS_PER_SECOND / scale)

    def of(self, is_read: bool) -> float:
        return self.reads if is_read else self.writes


@dataclass(frozen=True, slots=True)
class SplitRule:
    """When a hot partition splits; see the module docstring."""

    sustain_seconds: int = 10
    hot_fraction: float = 1.0
    sample: int = 4096
    """Keys of recent demand a partition remembers, to place its split."""


class TokenBucket:
    """``rate`` tokens a second, holding at most ``burst`` seconds of them; starts full."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate * burst)
        self.tokens = self.capacity
        self._last = now

    def take(self, now: float) -> bool:
        """Spend one token if there is one."""
        self.tokens = min(self.capacity, self.tokens + (now - self._last) * self.rate)
        self._last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


def _kind(is_read: bool) -> str:
    return "read" if is_read else "write"


class Partition:
    """One partition: its rates, what it admitted and throttled, and whether it runs hot."""

    def __init__(
        self,
        bucket: str,
        lo: str,
        hi: str | None,
        rates: Rates,
        now: float,
        *,
        burst: float = 1.0,
        rule: SplitRule | None = None,
    ) -> None:
        self.bucket = bucket
        self.lo = lo
        self.hi = hi
        self.rates = rates
        self.created = now
        self.admitted: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()
        self.hot_streak = 0
        self.retired: float | None = None
        """When it was split (its halves serve its keys from then on)."""
        self._rule = rule or SplitRule(sample=1)
        self._buckets = {
            "write": TokenBucket(rates.writes, burst, now),
            "read": TokenBucket(rates.reads, burst, now),
        }
        self._second = int(now)
        self._demand: Counter[str] = Counter()
        self._keys: deque[str] = deque()

    @property
    def label(self) -> str:
        return f"[{self.lo!r}, {self.hi!r})" if self.hi is not None else f"[{self.lo!r}, end)"

    def admit(self, key: str, is_read: bool, now: float) -> bool:
        """Record the demand and spend a token of its class; False means 503 SlowDown."""
        self._roll(now)
        kind = _kind(is_read)
        self._demand[kind] += 1
        self._keys.append(key)
        while len(self._keys) > self._rule.sample:
            self._keys.popleft()
        ok = self._buckets[kind].take(now)
        (self.admitted if ok else self.throttled)[kind] += 1
        return ok

    def _roll(self, now: float) -> None:
        """Close the seconds that ended before ``now``: was the last one hot?"""
        second = int(now)
        if second == self._second:
            return
        self.hot_streak = self.hot_streak + 1 if self._was_hot() else 0
        if second > self._second + 1:
            self.hot_streak = 0  # a second with no demand at all is not hot
        self._second = second
        self._demand.clear()

    def _was_hot(self) -> bool:
        return any(
            self._demand[kind] >= self.rates.of(kind == "read") * self._rule.hot_fraction
            for kind in ("read", "write")
        )

    def split_point(self) -> str | None:
        """The median key of recent demand, or the next key above the lowest; None if one key."""
        keys = sorted(self._keys)
        if not keys or keys[0] == keys[-1]:
            return None
        median = keys[len(keys) // 2]
        if median > keys[0]:
            return median
        return keys[bisect.bisect_right(keys, keys[0])]

    def to_json(self, origin: float, now: float) -> dict[str, Any]:
        """Its range and counts; its life in seconds from ``origin`` (the model's first request)."""
        return {
            "bucket": self.bucket,
            "from_seconds": round(self.created - origin, 2),
            "until_seconds": round((self.retired if self.retired is not None else now) - origin, 2),
            "lo": self.lo,
            "hi": self.hi,
            "admitted": dict(self.admitted),
            "throttled": dict(self.throttled),
            "retired": self.retired is not None,
        }


class PartitionModel:
    """A bucket's keys as partitions: by key range as S3 does, or by a fixed key function.

    ``partition_of`` is the key -> partition function. With ``function`` set,
    it names the partition (fixed partitions, never split: the state after S3
    has partitioned a layout the way it is meant to be). Without it,
    partitions are key ranges, starting from ``boundaries`` (none: one
    partition per bucket), split by ``split`` when one runs hot.

    >>> clock = iter([0.0, 0.1, 0.2]).__next__
    >>> model = PartitionModel(Rates(writes=2, reads=5), clock=clock, burst=1.0)
    >>> [model.admit("b", "queue/1", is_read=False) for _ in range(3)]
    [True, True, False]
    """

    def __init__(
        self,
        rates: Rates,
        *,
        boundaries: tuple[str, ...] = (),
        split: SplitRule | None = None,
        function: Callable[[str], str] | None = None,
        burst: float = 1.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if function is not None and (boundaries or split is not None):
            raise ValueError("a key function fixes the partitions: no boundaries or splits")
        self.rates = rates
        self.split = split
        self._boundaries = tuple(sorted(set(boundaries)))
        self._function = function
        self._burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._ranges: dict[str, list[Partition]] = {}
        self._named: dict[tuple[str, str], Partition] = {}
        self.splits: list[dict[str, Any]] = []
        self._retired: list[Partition] = []
        self._started: float | None = None

    def partition_of(self, bucket: str, key: str, now: float) -> Partition:
        """The partition that serves ``key`` in ``bucket`` (made on first use)."""
        if self._function is not None:
            name = self._function(key)
            found = self._named.get((bucket, name))
            if found is None:
                found = Partition(bucket, name, None, self.rates, now, burst=self._burst)
                self._named[(bucket, name)] = found
            return found
        ranges = self._ranges.get(bucket)
        if ranges is None:
            edges = ["", *self._boundaries]
            ranges = [
                self._partition(bucket, lo, hi, now)
                for lo, hi in zip(edges, [*edges[1:], None], strict=True)
            ]
            self._ranges[bucket] = ranges
        los = [p.lo for p in ranges]
        return ranges[bisect.bisect_right(los, key) - 1]

    def admit(self, bucket: str, key: str, *, is_read: bool) -> bool:
        """Whether the partition serving ``key`` takes this request now."""
        with self._lock:
            now = self._clock()
            if self._started is None:
                self._started = now
            partition = self.partition_of(bucket, key, now)
            ok = partition.admit(key, is_read, now)
            if self.split is not None and partition.hot_streak >= self.split.sustain_seconds:
                self._split(partition, now)
            return ok

    def _partition(self, bucket: str, lo: str, hi: str | None, now: float) -> Partition:
        return Partition(bucket, lo, hi, self.rates, now, burst=self._burst, rule=self.split)

    def _split(self, partition: Partition, now: float) -> None:
        point = partition.split_point()
        partition.hot_streak = 0
        if point is None:
            return
        ranges = self._ranges[partition.bucket]
        index = ranges.index(partition)
        left = self._partition(partition.bucket, partition.lo, point, now)
        right = self._partition(partition.bucket, point, partition.hi, now)
        ranges[index : index + 1] = [left, right]
        partition.retired = now
        self._retired.append(partition)
        self.splits.append(
            {
                "bucket": partition.bucket,
                "at": point,
                "seconds": round(now - (self._started or now), 2),
                "parent": partition.label,
            }
        )

    def partitions(self, bucket: str | None = None, *, retired: bool = False) -> list[Partition]:
        """The partitions serving now (of ``bucket`` only, if given), in key order.

        With ``retired``, also those that were split, which keep what they counted.
        """
        with self._lock:
            found = [p for ranges in self._ranges.values() for p in ranges]
            found += list(self._named.values())
            if retired:
                found += self._retired
        return [p for p in found if bucket is None or p.bucket == bucket]

    def snapshot(self, bucket: str | None = None) -> dict[str, Any]:
        """JSON-friendly state: the rates, each partition's counts, and the splits so far."""
        parts = self.partitions(bucket, retired=True)
        now = self._clock()
        origin = self._started if self._started is not None else now
        return {
            "rates": {"writes": self.rates.writes, "reads": self.rates.reads},
            "seconds": round(now - origin, 2),
            "partitions": [p.to_json(origin, now) for p in parts],
            "splits": [s for s in self.splits if bucket is None or s["bucket"] == bucket],
        }


class PartitionPolicy:
    """The front's policy: forward what the partition model admits, throttle the rest."""

    def __init__(self, model: PartitionModel | None) -> None:
        self.model = model
        """None admits everything: the front then only counts (the server's own ceiling)."""

    def decide(self, request: S3Request) -> Decision:
        if self.model is None or request.key is None:
            return FORWARD
        admitted = self.model.admit(request.bucket, request.key, is_read=request.is_read)
        return FORWARD if admitted else THROTTLE


# -- key -> partition functions, by name, for plans and specs ------------------


def key_function(spec: str) -> Callable[[str], str]:
    """A key -> partition function from its name.

    * ``single``: one partition for every key;
    * ``segments:N``: the first N ``/``-separated segments of the key;
    * ``regex:PATTERN``: the first group of PATTERN matched at the key's start
      (the whole match if it has no group); keys that do not match share "".

    >>> key_function("segments:2")("queue/3/01J")
    'queue/3'
    >>> key_function(r"regex:^(?:queue|run|done)/(\\d+)/")("run/7/01J")
    '7'
    """
    name, _, arg = spec.partition(":")
    if name == "single":
        return lambda key: ""
    if name == "segments":
        count = int(arg)
        if count < 1:
            raise ValueError(f"segments needs N >= 1, got {spec!r}")
        return lambda key: "/".join(key.split("/")[:count])
    if name == "regex":
        pattern = re.compile(arg)

        def by_pattern(key: str) -> str:
            match = pattern.match(key)
            if match is None:
                return ""
            return match.group(1) if pattern.groups else match.group(0)

        return by_pattern
    raise ValueError(f"unknown key function {spec!r}: use single, segments:N or regex:PATTERN")


@dataclass(frozen=True)
class Layout:
    """How the front partitions keys in one measurement (JSON in plans and results).

    ``function`` names a key function (fixed partitions); otherwise the
    partitions are key ranges from ``boundaries``, split by ``split`` if set.
    ``scale`` divides AWS's rates; None means no limit at all.
    """

    name: str
    scale: float | None
    function: str | None = None
    boundaries: tuple[str, ...] = ()
    split: SplitRule | None = None
    connect: dict[str, Any] = field(default_factory=dict)
    """Extra ``Pail.connect`` options the layout needs (a shard count, later)."""

    def model(self, clock: Clock = time.monotonic) -> PartitionModel | None:
        if self.scale is None:
            return None
        return PartitionModel(
            Rates.aws(self.scale),
            boundaries=self.boundaries,
            split=self.split,
            function=key_function(self.function) if self.function else None,
            clock=clock,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scale": self.scale,
            "function": self.function,
            "boundaries": list(self.boundaries),
            "split": None
            if self.split is None
            else {
                "sustain_seconds": self.split.sustain_seconds,
                "hot_fraction": self.split.hot_fraction,
            },
            "connect": self.connect,
        }
