"""``pail pause`` and ``pail resume``, and what ``stats``, ``queues``, ``work-once`` and ``work`` make of them."""

from __future__ import annotations

import json

from pail import JobState, Pail
from pail.local import LocalS3
from tests.support.command import Invoke, LineReader, pail_script, process_env, start

HANDLER = ("--handler", "tests.cli.handlers:double")


def test_given_a_paused_queue_when_work_once_then_empty_code_and_the_job_waits_until_resume(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 2})

    paused = invoke("pause", bucket, "--reason", "deploying v2")
    idle = invoke("work-once", bucket, *HANDLER, "--empty-exit-code", "3")
    stats = invoke("stats", bucket, "--json")
    resumed = invoke("resume", bucket)
    worked = invoke("work-once", bucket, *HANDLER, "--empty-exit-code", "3")

    assert paused.exit_code == 0 and f"paused s3://{bucket}/" in paused.stdout
    assert idle.exit_code == 3, idle.stderr
    assert json.loads(idle.stdout.splitlines()[-1])["stop_reason"] == "paused"
    pause = json.loads(stats.stdout)["pause"]
    assert pause["paused"] is True and pause["reason"] == "deploying v2"
    assert json.loads(stats.stdout)["pending"] == 1
    assert resumed.exit_code == 0 and f"resumed s3://{bucket}/" in resumed.stdout
    assert worked.exit_code == 0, worked.stderr
    assert pail.result(job_id) == {"n": 4}


def test_given_pause_twice_and_resume_twice_then_each_says_what_it_found(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    first = invoke("pause", bucket, "--json")
    second = invoke("pause", bucket, "--reason", "ignored")
    human_stats = invoke("stats", bucket)
    resume = invoke("resume", bucket, "--json")
    again = invoke("resume", bucket)

    assert json.loads(first.stdout)["changed"] is True
    assert "was already paused since" in second.stdout
    assert "paused since" in human_stats.stdout and "pail resume" in human_stats.stdout
    assert json.loads(resume.stdout) == {"paused": False, "changed": True}
    assert "was not paused" in again.stdout
    assert pail.paused() is None


def test_given_one_paused_queue_of_two_when_queues_then_only_it_says_paused(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1})
    reports = Pail(pail.store, queue="reports")
    reports.enqueue({"n": 2})
    reports.pause("audit")

    data = json.loads(invoke("queues", bucket, "--json").stdout)
    human = invoke("queues", bucket)

    assert {row["queue"]: row["paused"] for row in data["queues"]} == {"": False, "reports": True}
    [row] = [line for line in human.stdout.splitlines() if line.startswith("reports")]
    assert row.split("\t")[-1] == "paused"


def test_given_a_foreign_marker_when_work_once_then_the_queue_counts_as_paused(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1})
    pail.store.put(pail.keys.paused(), b"\xff not pail's bytes")

    idle = invoke("work-once", bucket, *HANDLER, "--empty-exit-code", "3")
    stats = json.loads(invoke("stats", bucket, "--json").stdout)

    assert idle.exit_code == 3
    assert stats["pause"]["paused"] is True and stats["pause"]["by"] is None


def test_given_pail_work_on_a_paused_queue_when_resumed_then_it_logs_both_and_runs_the_job(
    s3_server: LocalS3, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 5})
    pail.pause("maintenance")
    args = [pail_script(), "work", bucket, *HANDLER, "--max-jobs", "1", "--poll-interval", "0.2"]
    process = start(args, process_env(s3_server.env()))
    try:
        log = LineReader(process.stderr)  # type: ignore[arg-type]
        log.wait_for("the queue is paused: claiming nothing")
        assert pail.status(job_id).state is JobState.PENDING  # type: ignore[union-attr]

        assert pail.resume()

        log.wait_for("the queue was resumed: claiming again")
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()
    assert pail.result(job_id) == {"n": 10}
