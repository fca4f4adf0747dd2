"""``ServiceWake``: start a pail Fargate service scaled to zero as soon as a job is enqueued.

A service that scales on the queue's metrics hears of a job only when the
reaper next publishes them (every minute) and an alarm acts on them. The
enqueue itself is an event: the bucket sends *Object Created* to EventBridge,
and a rule on ``queue/`` invokes a small function (``wake_handler``, inline)
that sets the service's desired count from 0 to 1. It does nothing to a
service that has tasks, so it never fights the scaling policy.

Why a function and not a direct target: an EventBridge rule cannot call
``ecs:UpdateService`` itself (API destinations sign with connection
credentials, not SigV4), and a Step Functions state machine doing
``DescribeServices`` then ``UpdateService`` is more parts (a state machine,
its logs, its role) for the same two calls. The function's role may call
exactly those two actions on exactly this service.
"""

from __future__ import annotations

import importlib.resources

from aws_cdk import Duration
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from pail_cdk import nag
from pail_cdk.bundling import LAMBDA_RUNTIME
from pail_cdk.queue import L1_REASON, PailQueue
from pail_cdk.wake_handler import ENV_CLUSTER, ENV_SERVICE, ENV_TASKS

WAKE_ACTIONS = ("ecs:DescribeServices", "ecs:UpdateService")
"""What the wake-up function may do, on its one service."""

_HANDLER_MODULE = "wake_handler.py"
_MAX_EVENT_AGE = Duration.minutes(10)
"""A wake-up older than this is pointless: the scaling policy has acted on the metrics by then."""


def handler_source() -> str:
    """The wake-up function's code, as shipped in ``pail_cdk`` (deployed inline as ``index.py``)."""
    return importlib.resources.files("pail_cdk").joinpath(_HANDLER_MODULE).read_text()


class ServiceWake(Construct):
    """An EventBridge rule on the queue's enqueues and the function that wakes ``service`` from 0.

    ``PailFargateWorker`` creates one for an auto scaling service whose
    ``min_tasks`` is 0. Attributes: ``function``, ``role``, ``log_group``, ``rule``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: PailQueue,
        service: ecs.FargateService,
        tasks: int = 1,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        """Create the rule, the function and its role; every argument is keyword-only.

        :param queue: the queue whose enqueues wake the service (its bucket sends events).
        :param service: the service to wake.
        :param tasks: the desired count a wake-up sets (from 0).
        :param log_retention: how long the function's logs are kept.
        """
        if tasks < 1:
            raise ValueError(f"a wake-up starts at least one task, got tasks={tasks}")
        super().__init__(scope, construct_id)
        name = queue.queue_dimension
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Wakes the Fargate service of pail queue {name!r} from zero tasks.",
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self.log_group.grant_write(self.role)
        iam.Grant.add_to_principal(
            grantee=self.role, actions=list(WAKE_ACTIONS), resource_arns=[service.service_arn]
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=f"pail: sets the service of queue {name!r} to {tasks} task(s) from 0.",
            runtime=LAMBDA_RUNTIME,
            architecture=queue.architecture,
            code=lambda_.Code.from_inline(handler_source()),
            handler="index.handler",
            # boto3 from pail's layer: the version the rest of pail runs with.
            layers=queue.layers,
            role=self.role,
            log_group=self.log_group,
            timeout=Duration.seconds(30),
            memory_size=128,
            # Wake-ups queue up behind one another: after the first, each finds tasks and ends.
            reserved_concurrent_executions=1,
            max_event_age=_MAX_EVENT_AGE,
            environment={
                ENV_CLUSTER: service.cluster.cluster_name,
                ENV_SERVICE: service.service_name,
                ENV_TASKS: str(tasks),
            },
        )
        nag.acknowledge(self.function, nag.L1, L1_REASON)
        self.rule = events.Rule(
            self,
            "OnEnqueue",
            description=f"Wakes the Fargate service of pail queue {name!r} when a job is enqueued.",
            event_pattern=queue.enqueued_event_pattern(),
            targets=[
                targets.LambdaFunction(
                    self.function, max_event_age=_MAX_EVENT_AGE, retry_attempts=2
                )
            ],
        )
