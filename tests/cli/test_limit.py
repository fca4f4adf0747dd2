"""``pail limit``: set, show and clear a queue's concurrency and rate limits (docs/limits.md)."""

from __future__ import annotations

import json

from pail import Pail
from pail.protocol.limits.rate import Rate
from tests.support.command import Invoke


def test_given_limits_set_from_the_cli_when_shown_then_every_limit_is_there_and_workers_read_them(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    steps = [
        invoke("limit", "concurrency", bucket, "5"),
        invoke("limit", "concurrency", bucket, "2", "--group", "*"),
        invoke("limit", "concurrency", bucket, "4", "--group", "big"),
        invoke("limit", "rate", bucket, "10/s"),
        invoke("limit", "rate", bucket, "1000/h", "--group", "*"),
    ]
    shown = invoke("limit", "show", bucket, "--json")
    human = invoke("limit", "show", bucket)

    assert all(step.exit_code == 0 for step in steps), [s.stderr for s in steps]
    assert json.loads(shown.stdout) == {
        "concurrency": 5,
        "group_concurrency": 2,
        "groups": {"big": 4},
        "rate": {"queue": "10/s", "group": "1000/h", "groups": {}},
        "unreadable": None,
    }
    assert "queue: at most 10/s starts" in human.stdout
    assert "group big: at most 4 running at once" in human.stdout
    assert pail.limits().concurrency == 5
    assert pail.rate_limits().queue == Rate(10, 1)


def test_given_a_rate_removed_and_limits_cleared_then_the_queue_has_none(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.set_limit(3)
    pail.set_rate("5/s")

    removed = invoke("limit", "rate", bucket, "none", "--json")
    cleared = invoke("limit", "clear", bucket)
    again = invoke("limit", "clear", bucket, "--json")

    assert json.loads(removed.stdout)["rate"]["queue"] is None
    assert json.loads(removed.stdout)["concurrency"] == 3  # the other limits are kept
    assert "limits removed" in cleared.stdout
    assert json.loads(again.stdout) == {"changed": False}
    assert "no limits" in invoke("limit", "show", bucket).stdout


def test_given_bad_limits_when_set_then_usage_errors_name_the_problem(
    invoke: Invoke, bucket: str
) -> None:
    bad_rate = invoke("limit", "rate", bucket, "10 a second")
    bad_count = invoke("limit", "concurrency", bucket, "lots")
    bad_group = invoke("limit", "concurrency", bucket, "2", "--group", "no spaces")

    assert bad_rate.exit_code == 2 and "invalid rate" in bad_rate.stderr
    assert bad_count.exit_code == 2 and "whole number" in bad_count.stderr
    assert bad_group.exit_code == 2, bad_group.stderr


def test_given_past_rate_tokens_when_swept_from_the_cli_then_they_go_and_the_current_stay(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    from datetime import UTC, datetime

    from pail.protocol.limits import rate

    limit = Rate(5, 60)
    window = limit.window(datetime.now(UTC))
    for back in (3, 2):
        pail.store.put(rate.token_key(pail.keys, rate.QUEUE_SCOPE, limit, window - back, 0), b"{}")
    current = rate.token_key(pail.keys, rate.QUEUE_SCOPE, limit, window + 1, 0)
    pail.store.put(current, b"{}")

    swept = invoke("limit", "sweep", bucket, "--json")

    assert json.loads(swept.stdout) == {"deleted": 2, "lists": 1, "foreign": 0, "more": False}
    assert [item.key for item in pail.store.list(pail.keys.rate_tokens()).items] == [current]
