"""The partition model's throttling and splitting, on a clock the test moves (no server)."""

from __future__ import annotations

import pytest
from pail_bench.front import S3Request
from pail_bench.partitions import (
    Layout,
    PartitionModel,
    PartitionPolicy,
    Rates,
    SplitRule,
    key_function,
)


class Clock:
    """Seconds that only move when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _writes(model: PartitionModel, key: str, n: int, bucket: str = "b") -> list[bool]:
    return [model.admit(bucket, key, is_read=False) for _ in range(n)]


def test_given_aws_rates_when_scaled_then_both_classes_divide() -> None:
    assert Rates.aws(1000) == Rates(writes=3.5, reads=5.5)
    with pytest.raises(ValueError):
        Rates.aws(0)


def test_given_a_full_bucket_when_writes_exceed_one_second_of_rate_then_the_rest_are_throttled() -> (
    None
):
    clock = Clock()
    model = PartitionModel(Rates(writes=4, reads=100), clock=clock)

    admitted = _writes(model, "queue/1", 6)

    assert admitted == [True] * 4 + [False] * 2


def test_given_an_empty_bucket_when_time_passes_then_tokens_come_back_at_the_rate() -> None:
    clock = Clock()
    model = PartitionModel(Rates(writes=4, reads=100), clock=clock)
    _writes(model, "queue/1", 4)

    clock.now += 0.5

    assert _writes(model, "queue/2", 3) == [True, True, False]


def test_given_throttled_requests_when_counted_then_they_spend_no_tokens() -> None:
    clock = Clock()
    model = PartitionModel(Rates(writes=2, reads=100), clock=clock)
    _writes(model, "k", 2)
    assert _writes(model, "k", 50) == [False] * 50

    clock.now += 0.5

    assert _writes(model, "k", 2) == [True, False]
    (partition,) = model.partitions()
    assert partition.admitted["write"] == 3 and partition.throttled["write"] == 51


def test_given_reads_and_writes_when_one_class_is_spent_then_the_other_still_passes() -> None:
    clock = Clock()
    model = PartitionModel(Rates(writes=1, reads=3), clock=clock)

    assert _writes(model, "k", 2) == [True, False]
    assert [model.admit("b", "k", is_read=True) for _ in range(4)] == [True] * 3 + [False]


def test_given_boundaries_when_keys_fall_either_side_then_each_range_has_its_own_rate() -> None:
    clock = Clock()
    model = PartitionModel(Rates(writes=2, reads=2), boundaries=("run/",), clock=clock)

    assert _writes(model, "queue/1", 3) == [True, True, False]
    assert _writes(model, "run/1", 2) == [True, True]
    assert _writes(model, "done/1", 1) == [False]  # "done/" sorts before "queue/": same range
    assert [p.lo for p in model.partitions()] == ["", "run/"]


def test_given_two_buckets_when_both_are_written_then_each_is_its_own_partition() -> None:
    clock = Clock()
    model = PartitionModel(Rates(writes=1, reads=1), clock=clock)

    assert _writes(model, "k", 1, bucket="a") == [True]
    assert _writes(model, "k", 1, bucket="b") == [True]
    assert _writes(model, "k", 1, bucket="a") == [False]


def _hot_seconds(
    model: PartitionModel, clock: Clock, keys: list[str], seconds: int, per_second: int
) -> None:
    """``per_second`` writes spread over ``keys`` in each of ``seconds`` whole seconds."""
    for _ in range(seconds):
        for i in range(per_second):
            model.admit("b", keys[i % len(keys)], is_read=False)
        clock.now += 1.0


def test_given_sustained_overload_when_it_lasts_long_enough_then_the_partition_splits_at_the_median() -> (
    None
):
    clock = Clock()
    rule = SplitRule(sustain_seconds=3)
    model = PartitionModel(Rates(writes=4, reads=100), split=rule, clock=clock)
    keys = [f"queue/{i:02d}" for i in range(10)]

    _hot_seconds(model, clock, keys, seconds=3, per_second=10)
    assert model.splits == []  # three hot seconds are closed only when the fourth begins
    model.admit("b", "queue/09", is_read=False)

    assert [s["at"] for s in model.splits] == ["queue/05"]
    left, right = model.partitions("b")
    assert (left.lo, left.hi, right.lo, right.hi) == ("", "queue/05", "queue/05", None)
    assert _writes(model, "queue/07", 4) == [True] * 4  # a new half starts with full rates


def test_given_overload_with_a_quiet_second_between_when_it_resumes_then_nothing_splits() -> None:
    clock = Clock()
    model = PartitionModel(
        Rates(writes=4, reads=100), split=SplitRule(sustain_seconds=3), clock=clock
    )
    keys = [f"queue/{i}" for i in range(8)]

    _hot_seconds(model, clock, keys, seconds=2, per_second=8)
    clock.now += 1.0  # nobody asked for anything for a second
    _hot_seconds(model, clock, keys, seconds=2, per_second=8)
    model.admit("b", "queue/0", is_read=False)

    assert model.splits == []


def test_given_load_below_the_rate_when_sustained_then_nothing_splits() -> None:
    clock = Clock()
    model = PartitionModel(
        Rates(writes=10, reads=100), split=SplitRule(sustain_seconds=2), clock=clock
    )

    _hot_seconds(model, clock, ["a", "b", "c"], seconds=10, per_second=9)

    assert model.splits == [] and len(model.partitions()) == 1


def test_given_one_hot_key_when_overloaded_then_it_cannot_be_split() -> None:
    clock = Clock()
    model = PartitionModel(
        Rates(writes=2, reads=100), split=SplitRule(sustain_seconds=2), clock=clock
    )

    _hot_seconds(model, clock, ["run/01J"], seconds=6, per_second=5)

    assert model.splits == [] and len(model.partitions()) == 1


def test_given_monotonic_keys_when_the_hot_range_splits_then_new_keys_all_land_in_the_upper_half() -> (
    None
):
    # ULIDs grow with time: whatever the split point, tomorrow's keys are above it.
    clock = Clock()
    model = PartitionModel(
        Rates(writes=4, reads=100), split=SplitRule(sustain_seconds=2), clock=clock
    )
    _hot_seconds(model, clock, [f"run/{i:04d}" for i in range(0, 20)], seconds=2, per_second=8)
    model.admit("b", "run/0020", is_read=False)
    assert len(model.splits) == 1
    upper = model.partitions("b")[-1]

    later = [f"run/{i:04d}" for i in range(100, 110)]

    assert {model.partition_of("b", key, clock.now).lo for key in later} == {upper.lo}
    assert _writes(model, later[0], 5) == [True] * 4 + [False]


def test_given_a_key_function_when_keys_name_different_partitions_then_each_has_its_own_rate() -> (
    None
):
    clock = Clock()
    shard = key_function(r"regex:^(?:queue|run|done)/(\d+)/")
    model = PartitionModel(Rates(writes=1, reads=1), function=shard, clock=clock)

    assert _writes(model, "queue/0/a", 2) == [True, False]
    assert _writes(model, "run/1/a", 1) == [True]
    assert _writes(model, "done/0/b", 1) == [False]  # shard 0 again, whatever the state


def test_given_a_key_function_when_splits_or_boundaries_are_asked_for_then_it_refuses() -> None:
    with pytest.raises(ValueError, match="fixes the partitions"):
        PartitionModel(Rates(1, 1), function=key_function("single"), split=SplitRule())


@pytest.mark.parametrize(
    ("spec", "key", "partition"),
    [
        ("single", "queue/01J", ""),
        ("segments:1", "queue/01J", "queue"),
        ("segments:2", "reports/queue/01J", "reports/queue"),
        (r"regex:^(\d+)/", "7/queue/01J", "7"),
        (r"regex:^(\d+)/", "queue/01J", ""),
        ("regex:^queue/", "queue/01J", "queue/"),
    ],
)
def test_given_a_key_function_name_when_built_then_it_names_the_partition(
    spec: str, key: str, partition: str
) -> None:
    assert key_function(spec)(key) == partition


@pytest.mark.parametrize("spec", ["", "hash", "segments:0", "segments:x"])
def test_given_an_unknown_key_function_when_built_then_it_is_a_clear_error(spec: str) -> None:
    with pytest.raises(ValueError):
        key_function(spec)


@pytest.mark.parametrize(
    ("method", "target", "bucket", "key", "is_list", "is_read"),
    [
        ("PUT", "/jobs/queue/01J", "jobs", "queue/01J", False, False),
        ("DELETE", "/jobs/run/01J?x-id=DeleteObject", "jobs", "run/01J", False, False),
        ("HEAD", "/jobs/done/a%20b", "jobs", "done/a b", False, True),
        ("GET", "/jobs?list-type=2&prefix=queue%2F&max-keys=1000", "jobs", "queue/", True, True),
        (
            "GET",
            "/jobs?list-type=2&prefix=queue%2F&start-after=queue%2F01J",
            "jobs",
            "queue/01J",
            True,
            True,
        ),
        ("PUT", "/jobs", "jobs", None, False, False),
        ("GET", "/jobs?list-type=2", "jobs", None, True, True),
    ],
)
def test_given_a_path_style_request_when_parsed_then_bucket_key_and_class_are_known(
    method: str, target: str, bucket: str, key: str | None, is_list: bool, is_read: bool
) -> None:
    request = S3Request.parse(method, target)

    assert (request.bucket, request.key, request.is_list, request.is_read) == (
        bucket,
        key,
        is_list,
        is_read,
    )


def test_given_a_policy_when_a_request_has_no_key_then_it_is_never_throttled() -> None:
    clock = Clock()
    policy = PartitionPolicy(PartitionModel(Rates(writes=1, reads=1), clock=clock))
    put = S3Request.parse("PUT", "/b/queue/1")

    assert [policy.decide(put).throttle for _ in range(2)] == [False, True]
    assert not policy.decide(S3Request.parse("PUT", "/b")).throttle
    assert not PartitionPolicy(None).decide(put).throttle


def test_given_a_layout_without_scale_then_it_has_no_model_and_with_one_it_is_scaled() -> None:
    assert Layout("no limit", scale=None).model() is None
    model = Layout("single", scale=500).model()
    assert model is not None and model.rates == Rates(writes=7.0, reads=11.0)
    json = Layout("sharded", scale=1000, function="segments:2", connect={"shards": 4}).to_json()
    assert json["function"] == "segments:2" and json["connect"] == {"shards": 4}
