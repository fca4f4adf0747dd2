"""``pail jobs --tag k=v --since 2h --state failed``: the search flags of ``pail jobs``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from ulid import ULID

from pail import Pail
from tests.cli.handlers import explode
from tests.support.command import Invoke


def test_given_tagged_jobs_when_jobs_tag_since_state_failed_then_only_the_failed_match(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    pail = connect(max_retries=0)
    failing = pail.enqueue({"n": 1}, tags={"customer": "acme"})
    assert pail.work_once(explode)
    pending = pail.enqueue({"n": 2}, tags={"customer": "acme"})
    pail.enqueue({"n": 3}, tags={"customer": "globex"})

    failed = invoke(
        "jobs", bucket, "--tag", "customer=acme", "--since", "2h", "--state", "failed", "--json"
    )
    any_state = invoke("jobs", bucket, "--tag", "customer=acme", "--json")
    human = invoke("jobs", bucket, "--tag", "customer=acme", "--state", "dead")

    assert failed.exit_code == 0, failed.stderr
    data = json.loads(failed.stdout)
    assert [job["id"] for job in data["jobs"]] == [failing]
    assert data["jobs"][0]["state"] == "failed" and data["plan"] == "index"
    assert data["requests"]["ListObjectsV2"] == 1
    assert sorted(job["id"] for job in json.loads(any_state.stdout)["jobs"]) == sorted(
        [failing, pending]
    )
    assert human.exit_code == 0, human.stderr
    assert failing in human.stdout and "customer=acme" in human.stdout
    assert "cost: index:" in human.stderr and "1 ListObjectsV2" in human.stderr


def test_given_jobs_over_time_when_jobs_since_until_then_the_window_paged(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    start = datetime.now(UTC) - timedelta(hours=5)
    ids = [str(ULID.from_datetime(start + timedelta(hours=h))) for h in range(5)]
    pail.enqueue_many([{"n": n} for n in range(5)], ids=ids)

    first = invoke("jobs", bucket, "--since", "270m", "--until", "30m", "--limit", "2", "--json")
    page = json.loads(first.stdout)
    second = invoke(
        "jobs", bucket, "--since", "270m", "--until", "30m", "--after", page["next_after"], "--json"
    )

    assert first.exit_code == 0, first.stderr
    assert [job["id"] for job in page["jobs"]] == ids[1:3] and page["more"]
    assert [job["id"] for job in json.loads(second.stdout)["jobs"]] == ids[3:5]


def test_given_bad_search_flags_when_jobs_then_usage_error(invoke: Invoke, bucket: str) -> None:
    bad_tag = invoke("jobs", bucket, "--tag", "customer")
    bad_time = invoke("jobs", bucket, "--since", "yesterday")
    delayed = invoke("jobs", bucket, "--tag", "a=b", "--state", "delayed")

    assert bad_tag.exit_code == 2 and "key=value" in bad_tag.stderr
    assert bad_time.exit_code == 2 and "neither an age" in bad_time.stderr
    assert delayed.exit_code == 2 and "delayed" in delayed.stderr


def test_given_enqueue_with_tags_when_status_then_the_tags_show_and_search_finds_it(
    invoke: Invoke, bucket: str
) -> None:
    made = invoke(
        "enqueue", bucket, '{"n": 1}', "--tag", "customer=acme", "--tag", "kind=export", "--json"
    )
    job_id = json.loads(made.stdout)["id"]
    shown = invoke("status", bucket, job_id)
    found = invoke("jobs", bucket, "--tag", "kind=export", "--json")
    bad = invoke("enqueue", bucket, '{"n": 2}', "--tag", "bad key=x")

    assert made.exit_code == 0, made.stderr
    assert "customer=acme kind=export" in shown.stdout
    assert [job["id"] for job in json.loads(found.stdout)["jobs"]] == [job_id]
    assert bad.exit_code == 2 and "tag key 'bad key'" in bad.stderr
