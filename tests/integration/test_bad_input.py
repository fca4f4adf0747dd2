"""Bad input gets a clear error, and nothing is lost; the worker loop never dies on one bad job."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from pail import (
    AccessDeniedError,
    BucketNotFoundError,
    ConfigurationError,
    JobState,
    Pail,
)
from pail.local import LocalS3


def test_given_garbage_under_queue_when_working_then_it_is_dead_lettered_and_loop_goes_on(
    pail: Pail,
) -> None:
    pail.store.put(pail.keys.queue("00000000000000000000GARBAGE"), b"\x00not json{", metadata={})
    good = pail.enqueue({"n": 1})

    processed = 0
    while pail.work_once(lambda p: p):
        processed += 1

    assert processed == 1  # the garbage is dead-lettered on a claim's way, not processed
    assert pail.result(good) == {"n": 1}
    [letter] = pail.dead_letters()
    assert letter.job_id == "00000000000000000000GARBAGE"
    assert letter.error is not None and letter.error.type == "DecodeError"
    assert letter.raw is not None and "not json" in letter.raw
    assert pail.stats().pending == 0


def test_given_handler_returning_unserialisable_when_worked_then_attempt_fails_with_error(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=1)
    job_id = pail.enqueue({"n": 1})

    assert pail.work_once(lambda p: {"when": object()}) is True

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING and status.attempts == 1
    assert status.error is not None and status.error.type == "PayloadError"
    assert "not JSON-serialisable" in status.error.message


def test_given_hanging_handler_when_job_timeout_then_attempt_fails_and_loop_goes_on(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=0)
    release = threading.Event()
    hung = pail.enqueue({"hang": True})
    pail.enqueue({"hang": False})

    def handler(payload: dict[str, bool]) -> dict[str, bool]:
        if payload["hang"]:
            release.wait(30)
        return payload

    try:
        while pail.work_once(handler, job_timeout=0.5):
            pass
    finally:
        release.set()

    status = pail.status(hung)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and status.error.type == "HandlerTimeoutError"
    assert pail.stats().done == 1


def test_given_handler_raising_when_work_loop_runs_then_it_goes_on_to_next_jobs(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=0)

    class BoomError(Exception):
        pass

    ids = [pail.enqueue({"i": i}) for i in range(3)]

    def handler(payload: dict[str, int]) -> dict[str, int]:
        if payload["i"] == 1:
            raise BoomError("only this one")
        return payload

    pail.work(handler, max_jobs=3, min_poll_interval=0.01, poll_interval=0.01)

    assert pail.result(ids[0]) == {"i": 0} and pail.result(ids[2]) == {"i": 2}
    status = pail.status(ids[1])
    assert status is not None and status.error is not None and status.error.type == "BoomError"


def test_given_missing_bucket_when_enqueue_then_error_names_bucket(s3_server: LocalS3) -> None:
    pail = Pail.connect(
        "no-such-bucket-here",
        endpoint_url=s3_server.endpoint_url,
        access_key_id="pail-local",
        secret_access_key="pail-local-secret",
    )
    with pytest.raises(BucketNotFoundError, match=r"no-such-bucket-here.*does not exist"):
        pail.enqueue({"n": 1})


@pytest.mark.parametrize("name", ["ab", "Has_Upper", "-leading", "a" * 64, "two..dots"])
def test_given_invalid_bucket_name_when_connect_then_configuration_error(name: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid bucket name"):
        Pail.connect(name)


def test_given_no_credentials_when_enqueue_then_access_error_names_bucket(
    s3_server: LocalS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    pail = Pail.connect(bucket, endpoint_url=s3_server.endpoint_url, region="us-east-1")
    with pytest.raises(AccessDeniedError, match=f"{bucket}.*no AWS credentials"):
        pail.enqueue({"n": 1})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"visibility_timeout": 0}, "visibility_timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"queue": "Bad/Name"}, "invalid queue namespace"),
    ],
)
def test_given_invalid_settings_when_connect_then_configuration_error(
    s3_server: LocalS3, bucket: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Pail.connect(bucket, **{**s3_server.connect_kwargs(), **options})
