"""``pail jobs``, ``pail queues``, ``pail purge``, ``pail dlq delete`` and ``pail server --bucket``."""

from __future__ import annotations

import json
from collections.abc import Callable

from pail import JobState, Pail
from pail.local import ACCESS_KEY, SECRET_KEY, LocalS3
from tests.cli.handlers import explode
from tests.servers import make_s3_client
from tests.support.command import Invoke, LineReader, pail_script, process_env, start, stop
from tests.support.population import HOLDER, Population, populate
from tests.support.queues import local_kwargs


def test_given_every_state_when_jobs_running_json_then_holder_and_progress_listed(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    population = populate(pail)

    result = invoke("jobs", bucket, "--state", "running", "--json")

    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    rows = {row["id"]: row for row in data["jobs"]}
    assert rows[population.running]["detail"]["holder"] == HOLDER
    assert rows[population.running]["detail"]["progress"]["message"] == "rendering charts"
    assert any(row["state"] == "foreign" for row in data["jobs"])
    assert data["more"] is False


def test_given_pending_jobs_when_jobs_human_then_a_row_per_job_with_its_age(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    ids = pail.enqueue_many([{"n": 1}, {"n": 2}])

    result = invoke("jobs", bucket)

    assert result.exit_code == 0, result.stderr
    # Off a terminal: the title is a note on stderr; stdout is a header and one row per job.
    assert f"2 pending job(s) in s3://{bucket}/" in result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split("\t") == ["id", "state", "age", "in_state", "attempts", "holder/error/due"]
    assert [row.split("\t")[:2] for row in rows] == [[job_id, "pending"] for job_id in ids]


def test_given_more_jobs_than_the_limit_when_jobs_then_says_more_and_after_pages_on(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    ids = pail.enqueue_many([{"n": n} for n in range(3)])

    first = invoke("jobs", bucket, "--limit", "2", "--json")
    data = json.loads(first.stdout)
    second = invoke("jobs", bucket, "--limit", "2", "--after", data["next_after"], "--json")

    assert data["more"] is True and [row["id"] for row in data["jobs"]] == ids[:2]
    assert [row["id"] for row in json.loads(second.stdout)["jobs"]] == ids[2:]
    human = invoke("jobs", bucket, "--limit", "2")
    assert "lower bound" in human.stderr and "--after" in human.stderr


def test_given_an_unknown_state_when_jobs_then_usage_error(invoke: Invoke, bucket: str) -> None:
    result = invoke("jobs", bucket, "--state", "finished")

    assert result.exit_code == 2


def test_given_pending_and_running_jobs_when_purge_yes_then_pending_cancelled_running_untouched(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    population: Population = populate(pail, hostile=False)

    result = invoke("purge", bucket, "--yes", "--json")

    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert len(data["cancelled"]) == 4  # two pending, the retry, the delayed one
    assert pail.status(population.pending[0]).state is JobState.CANCELLED  # type: ignore[union-attr]
    assert pail.status(population.running).state is JobState.RUNNING  # type: ignore[union-attr]


def test_given_no_terminal_and_no_yes_when_purge_then_usage_error_and_nothing_cancelled(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    result = invoke("purge", bucket)

    assert result.exit_code == 2
    assert "--yes" in result.stderr
    assert pail.status(job_id).state is JobState.PENDING  # type: ignore[union-attr]


def test_given_a_dead_letter_when_dlq_delete_yes_then_gone_and_the_job_stays_failed(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    strict = connect(max_retries=0)
    job_id = strict.enqueue({"n": 1})
    strict.work_once(explode)

    result = invoke("dlq", "delete", bucket, job_id, "--yes")

    assert result.exit_code == 0, result.stderr
    assert f"deleted dead letter {job_id}" in result.stdout
    assert strict.status(job_id).state is JobState.FAILED  # type: ignore[union-attr]
    assert invoke("dlq", "show", bucket, job_id).exit_code == 3
    assert invoke("dlq", "delete", bucket, job_id, "--yes").exit_code == 3


def test_given_queues_and_hostile_objects_when_queues_json_then_each_queue_with_counts(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    populate(connect())
    connect(queue="reports").enqueue({"n": 1})

    result = invoke("queues", bucket, "--json")

    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    by_name = {row["queue"]: row for row in data["queues"]}
    assert set(by_name) == {"", "reports"}
    assert by_name["reports"]["pending"] == {"count": 1, "exact": True}
    assert by_name[""]["cancelled"]["count"] == 1
    human = invoke("queues", bucket)
    assert "(default)" in human.stdout and "reports" in human.stdout


def test_given_server_with_bucket_when_started_then_a_newcomer_can_enqueue_at_once() -> None:
    env = process_env({"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY})
    process = start([pail_script(), "server", "--port", "0", "--bucket", "jobs"], env)
    try:
        stdout = LineReader(process.stdout)  # type: ignore[arg-type]
        endpoint = stdout.wait_for("listening on").split()[-1]  # the port the server bound
        stdout.wait_for("created bucket s3://jobs")
        client = make_s3_client(local_kwargs(endpoint))
        assert [b["Name"] for b in client.list_buckets()["Buckets"]] == ["jobs"]
    finally:
        stop(process)


def test_given_an_invalid_bucket_name_when_server_then_usage_error(invoke: Invoke) -> None:
    result = invoke("server", "--bucket", "Not_Valid")

    assert result.exit_code == 2
    assert "invalid bucket name" in result.stderr


def test_given_dashboard_command_when_started_then_its_link_opens_a_session_and_serves_pages(
    s3_server: LocalS3, bucket: str
) -> None:
    import http.client
    from urllib.parse import urlsplit

    populate(Pail.connect(bucket, **s3_server.connect_kwargs()), hostile=False)  # type: ignore[arg-type]
    process = start([pail_script(), "dashboard", bucket], process_env(s3_server.env()))
    try:
        link = LineReader(process.stdout).wait_for("/?token=").strip()  # type: ignore[arg-type]
        parts = urlsplit(link)
        assert parts.hostname is not None and parts.hostname.endswith(".localhost")
        assert parts.port is not None

        def get(path: str, cookie: str = "") -> http.client.HTTPResponse:
            # Browsers resolve *.localhost to the loopback address themselves.
            connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
            headers = {"Host": parts.netloc, **({"Cookie": cookie} if cookie else {})}
            connection.request("GET", path, headers=headers)
            return connection.getresponse()

        opened = get(f"/?{parts.query}")
        cookie = (opened.getheader("Set-Cookie") or "").split(";", 1)[0]
        overview = get("/", cookie)
        refused = get("/")

        assert opened.status == 200 and cookie
        assert overview.status == 200 and "(default)" in overview.read().decode()
        assert refused.status == 403
    finally:
        stop(process)
