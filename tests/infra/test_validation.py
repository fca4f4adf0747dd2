"""Bad construct input fails at construction, with a message that says what to do."""

from __future__ import annotations

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

import app as example_app
from pail.errors import ConfigurationError
from pail_cdk import PailFargateWorker, PailQueue, PailWorkerFunction
from pail_cdk.errors import PailCdkError


@pytest.fixture(scope="module")
def queue() -> PailQueue:
    """One queue to hang workers on (construction bundles its layer once)."""
    stack = Stack(App(context=example_app.cdk_json_context()), "Workers")
    return PailQueue(stack, "Queue")


def _step(**kwargs: float) -> appscaling.ScalingInterval:
    return appscaling.ScalingInterval(**kwargs)


def _code() -> lambda_.Code:
    return lambda_.Code.from_asset(str(example_app.HANDLERS))


def test_given_bucket_and_bucket_props_when_constructed_then_rejects_both(stack: Stack) -> None:
    existing = s3.Bucket.from_bucket_name(stack, "Existing", "existing")
    with pytest.raises(ValueError, match="existing bucket or bucket_props, not both"):
        PailQueue(stack, "Queue", bucket=existing, bucket_props=s3.BucketProps(versioned=True))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"namespace": "Bad Name"}, ValueError, "invalid queue namespace"),
        ({"shards": 3}, ValueError, "power of two"),
        ({"max_retries": -1}, ConfigurationError, "max_retries"),
        ({"visibility_timeout": Duration.seconds(0)}, ConfigurationError, "visibility_timeout"),
        ({"reaper_schedule": Duration.seconds(30)}, ValueError, "at least 1 minute"),
        ({"dedup_key_ttl": Duration.days(7)}, ValueError, "shorter than result_ttl"),
        (
            {"reaper_timeout": Duration.minutes(2)},
            ValueError,
            "must not exceed reaper_schedule",
        ),
    ],
)
def test_given_bad_queue_options_when_constructed_then_rejects_them(
    stack: Stack, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        PailQueue(stack, "Queue", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"handler": "report"}, "module.function"),
        ({"safety_margin": Duration.minutes(5)}, "never has time to claim"),
        (
            {"timeout": Duration.seconds(20), "safety_margin": Duration.seconds(5)},
            "must not exceed the worker's timeout",
        ),
        ({"timeout": Duration.minutes(16)}, "at most 15 minutes"),
        ({"reserved_concurrency": 0}, "reserved_concurrency"),
        ({"max_jobs": 0}, "max_jobs"),
    ],
)
def test_given_bad_worker_options_when_constructed_then_rejects_them(
    queue: PailQueue, kwargs: dict[str, object], message: str
) -> None:
    props: dict[str, object] = {"handler": "report.handler", "code": _code(), **kwargs}
    with pytest.raises(ValueError, match=message):
        PailWorkerFunction(queue, "Worker", queue=queue, **props)  # type: ignore[arg-type]


def test_given_a_second_worker_function_when_registered_then_asks_to_opt_out(
    queue: PailQueue,
) -> None:
    PailWorkerFunction(queue, "First", queue=queue, handler="report.handler", code=_code())
    with pytest.raises(ValueError, match="register_with_reaper=False"):
        PailWorkerFunction(queue, "Second", queue=queue, handler="report.handler", code=_code())
    PailWorkerFunction(
        queue,
        "Third",
        queue=queue,
        handler="report.handler",
        code=_code(),
        register_with_reaper=False,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"handler": "report.run"}, "module:function"),
        ({"mode": "forever"}, "forever"),
        ({"max_jobs": 0}, "max_jobs"),
        ({"stop_timeout": Duration.minutes(3)}, "stop_timeout must be"),
        ({"grace_period": Duration.minutes(2)}, "lease is given back before SIGKILL"),
        ({"max_tasks": 4}, "for mode='service'"),
        ({"mode": "service", "min_tasks": 1}, "need max_tasks"),
        ({"mode": "service", "max_tasks": 4, "desired_count": 2}, "not desired_count"),
        ({"mode": "service", "max_tasks": 0}, "max_tasks must be at least 1"),
        ({"mode": "service", "max_tasks": 2, "min_tasks": 3}, "min_tasks must be 0 to max_tasks"),
        (
            {"mode": "service", "max_tasks": 4, "scaling_steps": [_step(upper=0, change=-1)]},
            "a scale-out step",
        ),
        (
            {
                "mode": "service",
                "max_tasks": 4,
                "scaling_steps": [_step(lower=5, change=1), _step(lower=2, change=2)],
            },
            "increase",
        ),
        (
            {"mode": "service", "max_tasks": 4, "scaling_steps": [_step(lower=1, change=0)]},
            "whole number of tasks",
        ),
        (
            {"mode": "service", "max_tasks": 4, "scale_in_after": Duration.seconds(30)},
            "scale_in_after must be at least 1 minute",
        ),
    ],
)
def test_given_bad_fargate_options_when_constructed_then_rejects_them(
    queue: PailQueue, kwargs: dict[str, object], message: str
) -> None:
    props: dict[str, object] = {
        "handler": "report:run",
        "image": ecs.ContainerImage.from_registry("example/worker"),
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        PailFargateWorker(queue, "Task", queue=queue, **props)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "@reboot"}, "unknown cron alias"),
        ({"cron": "@daily", "timezone": "Nowhere/City"}, "unknown timezone"),
        ({"every": Duration.millis(1500)}, "every must be"),
        ({}, "exactly one of"),
    ],
)
def test_given_bad_schedule_when_declared_then_the_synth_fails_with_the_runtime_s_message(
    queue: PailQueue, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        queue.add_schedule("bad", {}, **kwargs)  # type: ignore[arg-type]
    assert "bad" not in [s["name"] for s in queue.schedules]


def test_given_schedules_when_declared_then_names_are_unique_and_they_fit_the_environment(
    queue: PailQueue,
) -> None:
    queue.add_schedule("hourly", {"n": 1}, every=Duration.hours(1))
    with pytest.raises(PailCdkError, match="already has schedule 'hourly'"):
        queue.add_schedule("hourly", {"n": 2}, cron="@hourly")
    with pytest.raises(PailCdkError, match="more than 3072"):
        queue.add_schedule("big", {"blob": "x" * 4000}, cron="@daily")
    with pytest.raises(ConfigurationError, match="invalid schedule name"):
        queue.add_schedule("a/b", {}, cron="@daily")

    assert [s["name"] for s in queue.schedules] == ["hourly"]
    assert queue.schedules[0]["every"] == 3600
