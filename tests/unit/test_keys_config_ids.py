"""Names defined once: key prefixes, environment variables, ids."""

from __future__ import annotations

import pytest

from pail.config import Settings, parse_max_retries
from pail.errors import ConfigurationError
from pail.ids import is_ulid, new_job_id, ulid_time, validate_job_id
from pail.keys import Keys


def test_given_namespace_when_building_keys_then_every_prefix_is_under_it() -> None:
    keys = Keys("reports")
    assert [keys.queue("J"), keys.run("J"), keys.done("J"), keys.dlq("J")] == [
        "reports/queue/J",
        "reports/run/J",
        "reports/done/J",
        "reports/dlq/J",
    ]
    assert keys.job_id("reports/run/J") == "J"
    with pytest.raises(ValueError, match="not a job key"):
        keys.job_id("exports/run/J")


@pytest.mark.parametrize(
    "bad", ["Upper", "a/b", "-x", "x" * 64, "queue", "run", "done", "dlq", "keys"]
)
def test_given_invalid_namespace_then_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid queue namespace"):
        Keys(bad)


def test_given_environment_when_reading_settings_then_arguments_beat_environment() -> None:
    env = {"PAIL_BUCKET": "jobs", "PAIL_MAX_RETRIES": "none", "PAIL_VISIBILITY_TIMEOUT": "90"}
    settings = Settings.from_env(env, queue="reports")
    assert (settings.bucket, settings.queue, settings.max_retries) == ("jobs", "reports", None)
    assert settings.visibility_timeout == 90.0
    assert Settings.from_env(env, bucket="other").bucket == "other"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "no bucket"),
        ({"PAIL_BUCKET": "b", "PAIL_VISIBILITY_TIMEOUT": "soon"}, "number of seconds"),
        ({"PAIL_BUCKET": "b", "PAIL_VISIBILITY_TIMEOUT": "0"}, "visibility_timeout"),
        ({"PAIL_BUCKET": "b", "PAIL_MAX_RETRIES": "-2"}, "max_retries"),
    ],
)
def test_given_bad_environment_when_reading_settings_then_clear_error(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env(env)


def test_given_retry_ceiling_text_then_parsed() -> None:
    assert (parse_max_retries("0"), parse_max_retries("NONE")) == (0, None)


def test_given_new_ids_then_ulids_in_creation_order() -> None:
    ids = [new_job_id() for _ in range(50)]
    assert all(is_ulid(i) and len(i) == 26 for i in ids)
    assert ulid_time(ids[0]) is not None and ulid_time("not-a-ulid") is None
    stamps = [i[:10] for i in ids]  # the first 10 characters are the millisecond
    assert stamps == sorted(stamps)


@pytest.mark.parametrize("bad", ["", "a/b", "x" * 513])
def test_given_id_that_is_not_one_key_segment_then_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid job id"):
        validate_job_id(bad)
