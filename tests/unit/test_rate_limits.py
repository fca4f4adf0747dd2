"""Rate limits' start tokens (``pail.protocol.limits.rate``) on the in-memory store.

The server's clock is the test's (``tests.support.clocks.ServerClock``); the
takers' monotonic clock is a ``ManualClock`` the test moves with it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import datetime, timedelta

import pytest

from pail.clock import ManualClock
from pail.errors import ConfigurationError, DecodeError
from pail.keys import Keys
from pail.protocol.limits import rate
from pail.protocol.limits.rate import QUEUE_SCOPE, Rate, RateGate, group_scope, sweep, token_key
from pail.store.base import WriteResult
from tests.support.clocks import ServerClock
from tests.support.recording_store import RecordingStore

KEYS = Keys("q")


class World:
    """One bucket, its server clock, and takers whose monotonic clocks move with it."""

    def __init__(self) -> None:
        self.server = ServerClock()
        self.store = RecordingStore(now=self.server)
        self.clock = ManualClock(wall=self.server())

    def gate(self, owner: str = "w", seed: int = 0) -> RateGate:
        return RateGate(self.store, KEYS, clock=self.clock, owner=owner, rng=random.Random(seed))

    def advance(self, seconds: float) -> None:
        self.server.advance(seconds)
        self.clock.advance(seconds)

    def tokens(self) -> list[str]:
        stored = self.store.keys()
        return sorted(k for k in stored if k.startswith(KEYS.rate_tokens()))


def test_given_rate_texts_when_parsed_then_count_and_period_in_seconds() -> None:
    assert Rate.parse("10/s") == Rate(10, 1)
    assert Rate.parse("1000/h") == Rate(1000, 3600)
    assert Rate.parse("5 / 2s") == Rate(5, 2)
    assert Rate.parse("100/min") == Rate(100, 60)
    assert Rate.parse("20/day") == Rate(20, 86_400)
    for text in ("", "10", "0/s", "10/fortnight", "1001/s", "-1/s", "10/0s", "x/s", "1/2d"):
        with pytest.raises(ConfigurationError):
            Rate.parse(text)
    assert [str(Rate.parse(t)) for t in ("10/s", "1000/h", "5/2s", "7/min", "3/d")] == [
        "10/s",
        "1000/h",
        "5/2s",
        "7/min",
        "3/d",
    ]


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        "10/s",
        {"max": True, "per": 1},
        {"max": 5},
        {"max": 0, "per": 1},
        {"max": 5, "per": 1e3},
    ],
)
def test_given_foreign_rate_records_when_decoded_then_decode_error(value: object) -> None:
    with pytest.raises(DecodeError):
        Rate.from_json(value)


def test_given_a_fresh_taker_when_it_takes_then_it_lists_once_to_read_the_server_clock() -> None:
    world = World()
    gate = world.gate()

    first = gate.take(QUEUE_SCOPE, Rate(5, 1))

    assert first.granted and first.requests == 2  # the LIST that read the clock, the PUT
    world.store.clear()
    second = gate.take(QUEUE_SCOPE, Rate(5, 1))
    late = World()
    late.clock = ManualClock(wall=late.server() - timedelta(hours=1))  # a wrong local clock
    answer = late.gate().take(QUEUE_SCOPE, Rate(5, 1))
    assert answer.granted and answer.requests == 3  # a LIST of the wrong window, then as above
    assert answer.granted_at == late.server()
    assert second.granted and second.requests == 1 and second.failed == 0
    assert world.store.operations() == {"put": 1}


def test_given_a_taker_fed_the_claims_server_time_when_it_takes_then_one_put_per_start() -> None:
    world = World()
    gate = world.gate()
    gate.observe(world.server())

    answers = [gate.take(QUEUE_SCOPE, Rate(3, 60)) for _ in range(4)]

    assert [a.granted for a in answers] == [True, True, True, False]
    assert [a.requests for a in answers[:3]] == [1, 1, 1]
    assert answers[3].full and answers[3].requests == 0  # it knows its own three: no request
    assert 60 - 1 <= answers[3].wait <= 60 + 1
    assert len(world.tokens()) == 3


def test_given_a_full_window_when_the_next_begins_then_starts_are_granted_again() -> None:
    world = World()
    gate = world.gate()
    gate.observe(world.server())
    limit = Rate(2, 10)
    assert [gate.take(QUEUE_SCOPE, limit).granted for _ in range(3)] == [True, True, False]

    world.advance(10)

    again = gate.take(QUEUE_SCOPE, limit)
    assert again.granted
    assert again.requests == 1  # alone in the last window (no write lost): no listing


def test_given_many_racing_takers_when_they_take_then_no_window_grants_more_than_the_rate() -> None:
    world = World()
    gates = [world.gate(f"w{i}", seed=i) for i in range(16)]
    limit = Rate(5, 1)
    granted: dict[int, int] = {}
    for gate in gates:
        gate.observe(world.server())
    for _ in range(20):
        for gate in gates:
            answer = gate.take(QUEUE_SCOPE, limit)
            if answer.granted:
                assert answer.granted_at is not None
                window = limit.window(answer.granted_at)
                granted[window] = granted.get(window, 0) + 1
        world.advance(0.37)

    assert granted and max(granted.values()) == 5
    assert all(count <= 5 for count in granted.values())


def test_given_a_write_that_lands_in_the_next_window_when_taken_then_it_is_not_a_start() -> None:
    world = World()
    gate = world.gate()
    limit = Rate(1, 1)
    gate.observe(world.server())
    real_write = rate._write_token

    writes: list[str] = []

    def slow_write(*args: object, **kwargs: object) -> WriteResult | None:
        writes.append(str(args[1]))
        if len(writes) == 1:
            world.server.advance(1.0)  # the request travelled across the window's end
        return real_write(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rate, "_write_token", slow_write)
        answer = gate.take(QUEUE_SCOPE, limit)

    assert gate.stats.misfiled == 1 and len(writes) == 2
    assert answer.granted and answer.granted_at is not None and answer.key == writes[1]
    # The start it was granted is keyed by the window its write landed in.
    assert limit.window(answer.granted_at) == int(answer.key.rsplit("/", 2)[-2])


def test_given_foreign_objects_under_a_window_when_taking_then_a_slot_key_takes_a_slot_and_others_pass() -> (
    None
):
    world = World()
    limit = Rate(2, 60)
    window = limit.window(world.server())
    world.store.put(token_key(KEYS, QUEUE_SCOPE, limit, window, 0), b"\xff not json")
    base = rate.window_prefix(KEYS, QUEUE_SCOPE, limit, window)
    for junk in ("folder/", "0001/nested", "abcd", "00001", "9999"):
        world.store.put(base + junk, b"{}")
    gate = world.gate()

    answers = [gate.take(QUEUE_SCOPE, limit) for _ in range(3)]

    assert [a.granted for a in answers] == [True, False, False]
    assert answers[0].key == token_key(KEYS, QUEUE_SCOPE, limit, window, 1)


def test_given_group_and_queue_rates_when_the_queue_refuses_then_the_group_token_is_wasted() -> (
    None
):
    world = World()
    gate = world.gate()
    gate.observe(world.server())
    group = group_scope("tenant/42")
    scopes = [(group, Rate(5, 60)), (QUEUE_SCOPE, Rate(1, 60))]

    first, second = gate.take_all(scopes), gate.take_all(scopes)

    assert first.granted and not second.granted and second.wasted == 1
    assert sum(1 for k in world.tokens() if "/group/tenant%2F42/" in k) == 2


def test_given_tokens_of_past_and_current_windows_when_swept_then_only_past_ones_go() -> None:
    world = World()
    gate = world.gate()
    gate.observe(world.server())
    limit = Rate(3, 10)
    for _ in range(3):
        assert gate.take(QUEUE_SCOPE, limit).granted
    world.advance(10)
    assert gate.take(QUEUE_SCOPE, limit).granted
    world.store.put(KEYS.rate_tokens() + "queue/garbage", b"")
    current = [
        k for k in world.tokens() if k.endswith(f"{limit.window(world.server()):012d}/" + k[-4:])
    ]

    report = sweep(world.store, KEYS, max_deletes=2)
    assert report.deleted == 2 and report.more
    report = sweep(world.store, KEYS)

    assert report.deleted == 1 and not report.more and report.foreign == 1
    left = world.tokens()
    assert current and set(current) <= set(left)
    assert len(left) == 2  # the current window's token and the foreign key


def test_given_no_rate_tokens_when_swept_then_one_list_and_nothing_else() -> None:
    world = World()
    report = sweep(world.store, KEYS)
    assert (report.deleted, report.lists) == (0, 1)
    assert world.store.operations() == {"list": 1}


def _scopes(groups: Mapping[str, Rate]) -> list[tuple[str, Rate]]:
    return [(group_scope(name), limit) for name, limit in groups.items()]


def test_given_a_group_name_when_scoped_then_one_key_segment_and_back() -> None:
    scope = group_scope("a/b c?")
    assert "/" not in scope.removeprefix("group/")
    assert rate.scope_group(scope) == "a/b c?"
    assert rate.scope_group(QUEUE_SCOPE) is None
    with pytest.raises(ConfigurationError):
        group_scope("")
    assert _scopes({"t": Rate(1, 1)}) == [("group/t", Rate(1, 1))]


def test_given_the_server_clock_estimate_when_observed_then_it_never_moves_back() -> None:
    clock = ManualClock()
    estimate = rate.ServerClock(clock)
    assert not estimate.known
    start = ServerClock()()
    estimate.observe(start)
    clock.advance(0.6)
    estimate.observe(start)  # the same truncated Date, read later: the estimate keeps its lead
    assert estimate.seconds() == pytest.approx(start.timestamp() + 0.6)
    assert isinstance(estimate.now(), datetime)


def test_given_a_rate_section_when_decoded_then_scopes_group_first_then_queue() -> None:
    section = rate.RateLimits.from_json(
        {
            "queue": {"max": 10, "per": 1},
            "group": {"max": 2, "per": 1},
            "groups": {"big": {"max": 5, "per": 60}},
        }
    )
    assert section.limited and rate.RateLimits.from_json(section.to_json()) == section
    assert section.scopes("big") == [("group/big", Rate(5, 60)), (QUEUE_SCOPE, Rate(10, 1))]
    assert section.scopes("small") == [("group/small", Rate(2, 1)), (QUEUE_SCOPE, Rate(10, 1))]
    assert section.scopes(None) == [(QUEUE_SCOPE, Rate(10, 1))]
    assert not rate.RateLimits.from_json(None).limited


@pytest.mark.parametrize(
    "value",
    [
        "10/s",
        [1],
        {"queue": "10/s"},
        {"groups": []},
        {"groups": {"": {"max": 1, "per": 1}}},
        {"group": {"max": -1, "per": 1}},
    ],
)
def test_given_a_foreign_rate_section_when_decoded_then_one_start_a_second_and_a_reason(
    value: object,
) -> None:
    section = rate.RateLimits.from_json(value)
    assert section.queue == rate.FOREIGN_RATE and section.reason


def test_given_limits_when_the_dashboard_shows_the_queue_then_its_page_lists_them() -> None:
    from pail import Pail
    from pail.dashboard.model import Dashboard
    from pail.dashboard.views import limits_section

    store = RecordingStore()
    queue = Pail(store, shards=1)
    queue.set_limit(3)
    queue.set_rate("10/s", group="*")

    lines = Dashboard(store).queue_view("").limits

    assert lines == ("queue: at most 3 running at once", "each group: at most 10/s starts")
    assert "at most 3 running at once" in limits_section(lines)
    assert "none" in limits_section(())
    assert "&lt;b&gt;" in limits_section(("<b>",))
