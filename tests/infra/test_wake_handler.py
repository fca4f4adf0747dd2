"""The wake-up function's handler against the ECS double on 127.0.0.1, its role's policy enforced.

The deploy rehearsal runs the same handler from the synthesised app under
awslambdaric; these are its cases in-process: only a service at zero tasks
is raised, and a count the scaling policy set is never touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pail_cdk import wake_handler
from pail_cdk.wake import WAKE_ACTIONS

from .rehearsal.iam import Policy, Statement
from .rehearsal.proxy import AwsProxy, service_arn

ROLE = "WakeRole"
CLUSTER, SERVICE = "Reports-Cluster", "Reports-ExportService"


def _policy(*actions: str) -> Policy:
    arn = service_arn(CLUSTER, SERVICE)
    return Policy(ROLE, (Statement("Allow", actions, (arn,), {}),))


@pytest.fixture(scope="module")
def running_proxy() -> Iterator[AwsProxy]:
    """One proxy and one ECS client for the module (building a client loads ECS's model)."""
    environment = {
        "AWS_ACCESS_KEY_ID": ROLE,
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_SESSION_TOKEN": "session",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        wake_handler.ENV_CLUSTER: CLUSTER,
        wake_handler.ENV_SERVICE: SERVICE,
        wake_handler.ENV_TASKS: "1",
    }
    # No S3 behind it: only the ECS double is used.
    with AwsProxy("http://127.0.0.1:9", {}) as running, pytest.MonkeyPatch.context() as patch:
        for name, value in {**environment, "AWS_ENDPOINT_URL_ECS": running.endpoint_url}.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        patch.setattr(wake_handler, "_client", None)
        yield running


@pytest.fixture
def proxy(running_proxy: AwsProxy) -> AwsProxy:
    """The module's proxy with no service, no request recorded, and the wake-up's policy."""
    running_proxy.policies[ROLE] = _policy(*WAKE_ACTIONS)
    running_proxy.ecs_services.clear()
    running_proxy.ecs_updates.clear()
    running_proxy.clear()
    return running_proxy


EVENT = {"detail-type": "Object Created", "detail": {"object": {"key": "exports/queue/01J"}}}


def test_given_a_service_at_zero_when_woken_then_it_is_set_to_one_task(proxy: AwsProxy) -> None:
    service = proxy.add_ecs_service(CLUSTER, SERVICE, desired=0)

    result = wake_handler.handler(EVENT, None)

    assert result == {"woken": True, "desired": 1}
    assert service.desired == 1
    assert proxy.ecs_updates == [(service.arn, 1)]
    assert proxy.denied() == []


@pytest.mark.parametrize("desired", [1, 3])
def test_given_a_service_with_tasks_when_woken_then_its_count_is_left_to_the_policy(
    proxy: AwsProxy, desired: int
) -> None:
    service = proxy.add_ecs_service(CLUSTER, SERVICE, desired=desired)

    result = wake_handler.handler(EVENT, None)

    assert result == {"woken": False, "desired": desired}
    assert service.desired == desired
    assert proxy.ecs_updates == []
    assert [r.action for r in proxy.snapshot()] == ["ecs:DescribeServices"]


def test_given_an_unknown_service_when_woken_then_the_invocation_fails(proxy: AwsProxy) -> None:
    with pytest.raises(LookupError, match=SERVICE):
        wake_handler.handler(EVENT, None)
    assert proxy.ecs_updates == []


def test_given_a_role_without_update_when_woken_then_the_denial_fails_the_invocation(
    proxy: AwsProxy,
) -> None:
    from botocore.exceptions import ClientError

    proxy.policies[ROLE] = _policy("ecs:DescribeServices")
    service = proxy.add_ecs_service(CLUSTER, SERVICE, desired=0)

    with pytest.raises(ClientError, match="AccessDenied"):
        wake_handler.handler(EVENT, None)
    assert service.desired == 0
    assert [(r.action, r.allowed) for r in proxy.denied()] == [("ecs:UpdateService", False)]


@pytest.mark.parametrize("event", [None, "text", {"detail": "x"}, {"detail": {"object": 3}}])
def test_given_an_odd_event_when_woken_then_it_still_wakes(proxy: AwsProxy, event: object) -> None:
    proxy.add_ecs_service(CLUSTER, SERVICE, desired=0)

    assert wake_handler.handler(event, None) == {"woken": True, "desired": 1}
