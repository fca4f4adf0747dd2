"""``PailQueue``'s limits (concurrency, rates, groups): declared to the reaper, and the Fargate cap."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_ecs as ecs
from aws_cdk.assertions import Match, Template

from pail import config
from pail.keys import RATE
from pail_cdk import PailFargateWorker, PailQueue
from pail_cdk.queue import declare_limits

from .helpers import logical_id

GROUPS: dict[str, dict[str, int | str]] = {"big": {"concurrency": 4, "rate": "20/s"}}


@pytest.fixture(scope="module")
def template() -> Template:
    """One synth for the module: a limited queue with a Fargate service, and a plain queue."""
    import app as example_app  # infra/ is on the path (tests/infra/conftest.py)

    stack = Stack(App(context=example_app.cdk_json_context()), "Limits")
    limited = PailQueue(
        stack,
        "Limited",
        namespace="exports",
        concurrency=3,
        rate="10/s",
        group_concurrency=2,
        group_rate="1000/h",
        groups=GROUPS,
    )
    PailQueue(stack, "Plain", namespace="plain")
    PailFargateWorker(
        stack,
        "Workers",
        queue=limited,
        image=ecs.ContainerImage.from_registry("example/worker"),
        handler="report:run",
        mode="service",
        max_tasks=16,
    )
    return Template.from_stack(stack)


def _reaper_environment(template: Template, queue: str) -> dict[str, str]:
    whole = dict(template.to_json())
    reaper = whole["Resources"][logical_id(whole, "AWS::Lambda::Function", f"{queue}Reaper")]
    variables: dict[str, str] = reaper["Properties"]["Environment"]["Variables"]
    return variables


def test_given_limits_on_the_queue_when_synthesised_then_the_reaper_gets_them_as_the_limits_object(
    template: Template,
) -> None:
    declared = json.loads(_reaper_environment(template, "Limited")[config.ENV_LIMITS])

    assert declared == {
        "concurrency": 3,
        "group_concurrency": 2,
        "groups": {"big": 4},
        "rate": {
            "queue": {"max": 10, "per": 1},
            "group": {"max": 1000, "per": 3600},
            "groups": {"big": {"max": 20, "per": 1}},
        },
    }


def test_given_no_limits_when_synthesised_then_the_reaper_has_no_limits_variable(
    template: Template,
) -> None:
    assert config.ENV_LIMITS not in _reaper_environment(template, "Plain")


def test_given_a_queue_when_synthesised_then_rate_tokens_expire_after_a_day(
    template: Template,
) -> None:
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [Match.object_like({"Prefix": f"exports/{RATE}", "ExpirationInDays": 1})]
                )
            }
        },
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"concurrency": -1}, "concurrency must be"),
        ({"concurrency": True}, "concurrency must be"),
        ({"rate": "10 a second"}, "invalid rate"),
        ({"group_rate": "0/s"}, "a rate's max"),
        ({"groups": {"big": {"limit": 3}}}, "takes 'concurrency' and/or 'rate'"),
        ({"groups": {"big": {}}}, "takes 'concurrency' and/or 'rate'"),
    ],
)
def test_given_bad_limits_when_declared_then_the_synth_fails_with_the_reason(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        declare_limits(**kwargs)  # type: ignore[arg-type]


def test_given_a_queue_limited_to_3_when_a_service_scales_to_16_then_its_max_capacity_is_3(
    template: Template,
) -> None:
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 0, "MaxCapacity": 3}
    )


def test_given_min_tasks_above_the_concurrency_when_constructed_then_rejects_it(
    stack: Stack,
) -> None:
    queue = PailQueue(stack, "Jobs", concurrency=2)
    worker = PailFargateWorker(
        stack,
        "Capped",
        queue=queue,
        image=ecs.ContainerImage.from_registry("example/worker"),
        handler="report:run",
        mode="service",
        max_tasks=16,
    )
    assert worker.max_tasks == 2
    with pytest.raises(ValueError, match="more than the queue's concurrency limit"):
        PailFargateWorker(
            stack,
            "Workers",
            queue=queue,
            image=ecs.ContainerImage.from_registry("example/worker"),
            handler="report:run",
            mode="service",
            min_tasks=3,
            max_tasks=8,
        )


def _warnings(worker: PailFargateWorker) -> list[str]:
    return [str(entry.data) for entry in worker.node.metadata if entry.type == "aws:cdk:warning"]


def test_given_a_limited_queue_when_a_once_worker_starts_a_task_per_job_then_the_synth_warns(
    stack: Stack,
) -> None:
    limited, plain = PailQueue(stack, "Jobs", concurrency=2), PailQueue(stack, "Plain")
    image = ecs.ContainerImage.from_registry("example/worker")

    once = PailFargateWorker(stack, "Once", queue=limited, image=image, handler="report:run")
    unlimited = PailFargateWorker(stack, "Free", queue=plain, image=image, handler="report:run")
    service = PailFargateWorker(
        stack,
        "Service",
        queue=limited,
        image=image,
        handler="report:run",
        mode="service",
        max_tasks=8,
    )

    # A RunTask target has no cap: a task per enqueue, past the limit too. Said, not hidden.
    assert once.enqueue_rule is not None
    (warning,) = _warnings(once)
    assert "concurrency limit (2)" in warning and "exits 'limited'" in warning
    assert _warnings(unlimited) == [] and _warnings(service) == []
    assert service.max_tasks == 2
