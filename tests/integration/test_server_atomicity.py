"""The local S3 servers' conditional writes are atomic, or the tests prove nothing.

pail's correctness rests on S3 deciding each conditional write atomically: of
writers racing ``If-None-Match: *`` on one key exactly one creates it, and of
writers racing ``If-Match`` on one ETag exactly one replaces it. A test server
that checks then writes without a lock (as moto does unwrapped) lets two win,
and every protocol test on it would pass by luck. So each server is checked
here with real races: every thread has its own boto3 client (its own
connections), all wait on one barrier, and boto3's retries are off so each
thread reports the server's own first answer.

SeaweedFS makes the losers of a contended write wait in steps of one second
(measured: 32 racers take 3 to 8 s a round), so it runs fewer rounds; the
rounds still race 32 (or 16) clients each, which is what atomicity needs.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pail.local import LocalS3
from tests.racing import race
from tests.servers import SeaweedS3, make_s3_client

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.s3

CREATORS = 32
SWAPPERS = 16
WON = "won"
# The answers a loser may get: 412, or S3's retryable 409 ConditionalRequestConflict.
LOST = frozenset({"412", "409"})
# No retries: a retried 409 would turn into a 412 and hide what the server said.
RAW = Config(retries={"max_attempts": 1, "mode": "standard"}, max_pool_connections=1)

_bucket_numbers = itertools.count()


@dataclass(frozen=True, slots=True)
class Target:
    """A server to race on, and how many rounds it can afford."""

    name: str
    connect_kwargs: dict[str, str]
    create_rounds: int
    swap_rounds: int

    def clients(self, count: int) -> list[S3Client]:
        return [make_s3_client(self.connect_kwargs, config=RAW) for _ in range(count)]


@pytest.fixture(params=["moto", "seaweed"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "moto":
        moto: LocalS3 = request.getfixturevalue("s3_server")
        return Target("moto", moto.connect_kwargs(), create_rounds=20, swap_rounds=20)
    seaweed: SeaweedS3 = request.getfixturevalue("seaweed_server")
    return Target("seaweed", seaweed.connect_kwargs(), create_rounds=2, swap_rounds=2)


def _new_bucket(client: S3Client, name: str) -> str:
    bucket = f"race-{name}-{os.getpid()}-{next(_bucket_numbers)}"
    client.create_bucket(Bucket=bucket)
    return bucket


def _outcome(write: Callable[[], object]) -> str:
    """``WON``, or the HTTP status of the refusal; anything else propagates."""
    try:
        write()
    except ClientError as exc:
        return str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?"))
    return WON


def _assert_one_winner(round_: int, outcomes: list[str]) -> int:
    """Exactly one ``WON`` and only refusals besides; the winner's index."""
    tally = Counter(outcomes)
    assert tally[WON] == 1, f"round {round_}: {tally[WON]} winners ({dict(tally)})"
    assert set(tally) - {WON} <= LOST, f"round {round_}: unexpected answers {dict(tally)}"
    return outcomes.index(WON)


def test_given_32_clients_racing_put_if_none_match_on_one_key_then_exactly_one_wins_each_round(
    target: Target,
) -> None:
    clients = target.clients(CREATORS)
    bucket = _new_bucket(clients[0], target.name)

    def create(key: str, index: int) -> str:
        body = f"creator-{index}".encode()
        return _outcome(
            lambda: clients[index].put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
        )

    winners_per_round = []
    with ThreadPoolExecutor(CREATORS) as executor:
        for round_ in range(target.create_rounds):
            key = f"queue/{round_:026d}"
            outcomes = race(executor, CREATORS, functools.partial(create, key))

            winner = _assert_one_winner(round_, outcomes)
            winners_per_round.append(outcomes.count(WON))
            stored = clients[0].get_object(Bucket=bucket, Key=key)["Body"].read()
            assert stored == f"creator-{winner}".encode(), f"round {round_}: winner overwritten"

    assert winners_per_round == [1] * target.create_rounds


def test_given_16_clients_racing_put_if_match_on_one_etag_then_exactly_one_wins_each_round(
    target: Target,
) -> None:
    clients = target.clients(SWAPPERS)
    bucket = _new_bucket(clients[0], target.name)

    def swap(key: str, etag: str, index: int) -> str:
        body = f"swapper-{index}".encode()
        return _outcome(
            lambda: clients[index].put_object(Bucket=bucket, Key=key, Body=body, IfMatch=etag)
        )

    winners_per_round = []
    with ThreadPoolExecutor(SWAPPERS) as executor:
        for round_ in range(target.swap_rounds):
            key = f"run/{round_:026d}"
            etag = clients[0].put_object(Bucket=bucket, Key=key, Body=b"initial")["ETag"]
            outcomes = race(executor, SWAPPERS, functools.partial(swap, key, etag))

            winner = _assert_one_winner(round_, outcomes)
            winners_per_round.append(outcomes.count(WON))
            # No lost update: the object holds the one winner's body.
            stored = clients[0].get_object(Bucket=bucket, Key=key)["Body"].read()
            assert stored == f"swapper-{winner}".encode(), f"round {round_}: lost update"

    assert winners_per_round == [1] * target.swap_rounds
