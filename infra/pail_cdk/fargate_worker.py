"""``PailFargateWorker``: pail workers as Fargate tasks, for jobs longer than a Lambda allows.

Two modes:

* ``once`` (default): each task runs ``pail work-once --handler module:function``
  and exits. An EventBridge rule on *Object Created* under ``queue/`` starts a
  task per enqueued job (ECS RunTask target), and a schedule starts one as a
  safety net. Nothing runs, and nothing is billed, while the queue is empty.
* ``service``: an ECS service runs ``pail work --handler module:function``
  tasks, polling the queue: ``desired_count`` of them, or, with
  ``max_tasks``, between ``min_tasks`` (0 by default: nothing runs on an
  empty queue) and ``max_tasks``, scaled by step policies on the queue's own
  metrics (``pail_cdk.scaling``). A service at 0 tasks is woken by the
  enqueue's *Object Created* event (``pail_cdk.wake``), not a minute later by
  the metrics.

**Scale-in protection.** A service's task protects itself from scale-in
and deployments while it holds a job (ECS task scale-in protection, through
the container agent: ``pail.runner.protection``) and drops the protection
once idle; its role may call ``ecs:UpdateTaskProtection`` on its cluster's
tasks, and nothing else of ECS. A ``once`` task (started by ``RunTask``,
belonging to no service, so ECS would refuse it) is told not to try
(``PAIL_TASK_PROTECTION=false``) and gets no such right.

**Stopping a task that holds a job.** ECS stops a task with SIGTERM, then
SIGKILL ``stop_timeout`` later (at most 2 minutes on Fargate). The runner
claims nothing more, lets the running job finish within ``grace_period``,
and otherwise gives its lease back at once (the job is claimable again, the
attempt spent), ahead of the SIGKILL. Scale-in and deployments wait for a
protected task, so this path is for what ignores protection: Fargate
retiring a task, a task stopped by hand, a protection that could not be set.

The image must have the ``pail`` console script on its ``PATH`` and the
handler's module importable; its own entry point, if any, must run the command
it is given. ``pail_cdk.worker_image(directory)`` builds such an image from a
folder of the user's repository (``pail_cdk/worker.Dockerfile`` is its recipe).

Without a ``cluster``, one is created in a new VPC with public subnets only
and no NAT gateway (a NAT gateway costs more per month than most queues'
compute): tasks get a public IP for ECR and CloudWatch Logs, reach S3 through a
gateway endpoint, and accept no inbound traffic. Rejected traffic is logged
(VPC flow logs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum

from aws_cdk import Annotations, ArnFormat, Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from pail import config
from pail_cdk import nag
from pail_cdk.queue import PailQueue, merge_environment, seconds
from pail_cdk.scaling import (
    DEFAULT_SCALE_IN_AFTER,
    DEFAULT_SCALE_OUT_AFTER,
    DEFAULT_SCALE_OUT_COOLDOWN,
    DEFAULT_SCALING_STEPS,
    QueueScaling,
    check_scaling,
)
from pail_cdk.wake import ServiceWake

DEFAULT_SCHEDULE = Duration.minutes(5)
DEFAULT_STOP_TIMEOUT = Duration.seconds(120)
_MAX_STOP_TIMEOUT_SECONDS = 120
# Seconds kept after the grace period for giving the lease back (as the runtime's default:
# 25 s of grace in ECS's default 30 s stop timeout).
_LEASE_RELEASE_SECONDS = 5
_HANDLER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

ECS2_REASON = (
    "The container's environment holds only non-secret settings (bucket name, queue "
    "namespace, timeouts, handler path); the task role provides the credentials."
)

ECR_TOKEN_REASON = (
    "ecr:GetAuthorizationToken has no resource-level permissions: IAM requires Resource '*'. "
    "Pulling layers is limited to the image's repository in the statement beside it."
)
TAG_TASKS_REASON = (
    "The EventBridge RunTask target tags the tasks it starts (ecs:TagResource); task ids "
    "are only known once started, so the ARN is limited to this cluster's tasks."
)
PROTECT_TASKS_REASON = (
    "A task sets its own scale-in protection (ecs:UpdateTaskProtection, through the ECS agent) "
    "while it holds a job; task ids are only known once started, so the ARN is limited to "
    "this cluster's tasks."
)


def _check_service_size(
    mode: FargateWorkerMode,
    desired_count: int | None,
    min_tasks: int | None,
    max_tasks: int | None,
    scaling_steps: Sequence[appscaling.ScalingInterval] | None,
    scale_out_after: Duration,
    scale_in_after: Duration,
) -> None:
    """A fixed service takes ``desired_count``; an auto scaling one ``min_tasks``/``max_tasks``."""
    sized = desired_count is not None or min_tasks is not None or max_tasks is not None
    if mode is FargateWorkerMode.ONCE:
        if sized or scaling_steps is not None:
            raise ValueError(
                "desired_count, min_tasks, max_tasks and scaling_steps are for mode='service'"
            )
        return
    if max_tasks is None:
        if min_tasks is not None or scaling_steps is not None:
            raise ValueError("min_tasks and scaling_steps need max_tasks (an auto scaling service)")
        if desired_count is not None and desired_count < 0:
            raise ValueError(f"desired_count must be >= 0, got {desired_count}")
        return
    if desired_count is not None:
        raise ValueError(
            "an auto scaling service (max_tasks) takes min_tasks, not desired_count: its "
            "scaling policy owns the count"
        )
    check_scaling(
        min_tasks=0 if min_tasks is None else min_tasks,
        max_tasks=max_tasks,
        steps=DEFAULT_SCALING_STEPS if scaling_steps is None else scaling_steps,
        scale_out_after=scale_out_after,
        scale_in_after=scale_in_after,
    )


ONCE_MODE_LIMIT = "pail:OnceModeLimit"
"""The synth warning of a ``once`` worker on a queue with a concurrency limit (it is not capped)."""


def _capped_by_concurrency(
    limit: int | None, min_tasks: int | None, max_tasks: int | None, desired_count: int | None
) -> tuple[int | None, int | None, list[str]]:
    """``max_tasks`` and ``desired_count`` no larger than the queue's concurrency ``limit``.

    A task runs one job at a time, so a task past the limit could only wait
    (polling politely, claiming nothing): the auto scaling never grows past
    it. Returns the two counts and a note for each one capped.

    >>> _capped_by_concurrency(3, None, 16, None)
    (3, None, ['max_tasks=16 is capped at 3: the queue runs at most 3 jobs at once (PailQueue(concurrency=...))'])
    """
    if limit is None:
        return max_tasks, desired_count, []
    cap = max(1, limit)
    if min_tasks is not None and min_tasks > cap:
        raise ValueError(
            f"min_tasks ({min_tasks}) is more than the queue's concurrency limit ({limit}): "
            "the tasks past it could only wait"
        )
    notes = [
        f"{name}={value} is capped at {cap}: the queue runs at most {limit} jobs at once "
        "(PailQueue(concurrency=...))"
        for name, value in (("max_tasks", max_tasks), ("desired_count", desired_count))
        if value is not None and value > cap
    ]
    return (
        None if max_tasks is None else min(max_tasks, cap),
        None if desired_count is None else min(desired_count, cap),
        notes,
    )


def _fixed_count(desired_count: int | None) -> int:
    return 1 if desired_count is None else desired_count


def _grace_period(stop_timeout: Duration, grace_period: Duration | None) -> Duration:
    """The job's grace after SIGTERM: it must end before ECS's SIGKILL, with time to spare."""
    stop = stop_timeout.to_seconds()
    if not 0 < stop <= _MAX_STOP_TIMEOUT_SECONDS:
        raise ValueError(
            f"stop_timeout must be 1 s to 2 minutes, got {stop_timeout.to_human_string()}"
        )
    if grace_period is None:
        return Duration.seconds(max(stop - _LEASE_RELEASE_SECONDS, 0))
    if grace_period.to_seconds() >= stop:
        raise ValueError(
            f"grace_period ({grace_period.to_human_string()}) must be shorter than stop_timeout "
            f"({stop_timeout.to_human_string()}): the lease is given back before SIGKILL"
        )
    return grace_period


class FargateWorkerMode(StrEnum):
    """How a ``PailFargateWorker`` runs: one job per task, or a long-running service."""

    ONCE = "once"
    SERVICE = "service"


class PailFargateWorker(Construct):
    """Fargate tasks that work the jobs of a ``PailQueue`` with the user's handler.

    ::

        PailFargateWorker(
            self, "Exports", queue=queue, handler="report:run",
            image=worker_image("handlers"),
        )

    An auto scaling service, from zero tasks up to four::

        PailFargateWorker(
            self, "Exports", queue=queue, handler="report:run",
            image=worker_image("handlers"), mode="service", max_tasks=4,
        )

    Attributes: ``cluster``, ``task_definition``, ``container``, ``log_group``,
    ``security_group``, ``enqueue_rule`` and ``schedule_rule`` (``once`` mode),
    ``service`` (``service`` mode), ``scaling`` (a ``QueueScaling``) and
    ``wake`` (a ``ServiceWake``, when ``min_tasks`` is 0) for an auto scaling
    service; attributes that do not apply are None.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: PailQueue,
        image: ecs.ContainerImage,
        handler: str,
        cluster: ecs.ICluster | None = None,
        mode: FargateWorkerMode | str = FargateWorkerMode.ONCE,
        cpu: int = 256,
        memory_limit_mib: int = 512,
        cpu_architecture: ecs.CpuArchitecture = ecs.CpuArchitecture.X86_64,
        max_jobs: int | None = None,
        time_budget: Duration | None = None,
        trigger_on_enqueue: bool = True,
        schedule: Duration | None = DEFAULT_SCHEDULE,
        desired_count: int | None = None,
        min_tasks: int | None = None,
        max_tasks: int | None = None,
        scaling_steps: Sequence[appscaling.ScalingInterval] | None = None,
        scale_out_after: Duration = DEFAULT_SCALE_OUT_AFTER,
        scale_in_after: Duration = DEFAULT_SCALE_IN_AFTER,
        scale_out_cooldown: Duration = DEFAULT_SCALE_OUT_COOLDOWN,
        vpc_subnets: ec2.SubnetSelection | None = None,
        security_groups: Sequence[ec2.ISecurityGroup] | None = None,
        assign_public_ip: bool | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        stop_timeout: Duration = DEFAULT_STOP_TIMEOUT,
        grace_period: Duration | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        """Create the task definition and what starts it; every argument is keyword-only.

        :param queue: the queue to work.
        :param image: an image with the ``pail`` command and the handler's module.
        :param handler: the job handler, as ``module:function``.
        :param cluster: the ECS cluster; default: a new one in a new NAT-less VPC.
        :param mode: ``once`` (a task per job, started by events) or ``service``.
        :param cpu: task CPU units.
        :param memory_limit_mib: task memory in MiB.
        :param cpu_architecture: the image's CPU architecture.
        :param max_jobs: the most jobs one task works; None for no cap.
        :param time_budget: stop claiming jobs after this long; None for no budget.
        :param trigger_on_enqueue: start work on Object Created under ``queue/``: in ``once``
            mode a task per event; for an auto scaling service at 0 tasks, raise it to 1.
        :param schedule: ``once`` mode: also start a task this often; None for no schedule.
        :param desired_count: ``service`` mode without ``max_tasks``: how many tasks run
            (default 1).
        :param min_tasks: ``service`` mode: the fewest tasks of an auto scaling service
            (default 0: none while the queue is idle).
        :param max_tasks: ``service`` mode: scale between ``min_tasks`` and this many tasks on
            the queue's metrics (``pail_cdk.scaling``).
        :param scaling_steps: with ``max_tasks``: scale-out steps on the number of jobs
            waiting for a worker, each a lower bound and the tasks to add
            (``appscaling.ScalingInterval(lower=, change=)``). Default: one task per waiting
            job, at most 10 at once.
        :param scale_out_after: with ``max_tasks``: add tasks when a due job has waited this
            long for a worker.
        :param scale_in_after: with ``max_tasks``: stop tasks (down to ``min_tasks``) once
            none has held a job and none was due for this long.
        :param scale_out_cooldown: with ``max_tasks``: after adding tasks, how long to let
            them start before adding more.
        :param vpc_subnets: where tasks run; default: the cluster VPC's public subnets when
            this construct created the VPC, else its private subnets.
        :param security_groups: default: a new group with no inbound rules.
        :param assign_public_ip: default: True when this construct created the VPC.
        :param log_retention: how long the task logs are kept.
        :param stop_timeout: how long ECS waits after SIGTERM before SIGKILL (at most 2 minutes).
        :param grace_period: how long a running job may go on after SIGTERM before its lease
            is given back; below ``stop_timeout``. Default: ``stop_timeout`` less 5 seconds.
        :param environment: more environment variables for the handler.
        """
        # Everything is checked before the construct joins the tree.
        if not _HANDLER.match(handler):
            raise ValueError(f"handler must look like 'module:function', got {handler!r}")
        if max_jobs is not None and max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1 or None, got {max_jobs}")
        parsed_mode = FargateWorkerMode(mode)
        grace = _grace_period(stop_timeout, grace_period)
        _check_service_size(
            parsed_mode,
            desired_count,
            min_tasks,
            max_tasks,
            scaling_steps,
            scale_out_after,
            scale_in_after,
        )
        capped_max, desired_count, capped = _capped_by_concurrency(
            queue.concurrency, min_tasks, max_tasks, desired_count
        )
        super().__init__(scope, construct_id)
        self.mode = parsed_mode
        for note in capped:
            Annotations.of(self).add_info(note)
        max_tasks = capped_max
        self.max_tasks = max_tasks
        """The most tasks the auto scaling runs: ``max_tasks``, capped by the queue's concurrency."""

        own_network = cluster is None
        self.cluster: ecs.ICluster = (
            cluster if cluster is not None else self._new_cluster(express=queue.express)
        )
        if vpc_subnets is None:
            subnet_type = (
                ec2.SubnetType.PUBLIC if own_network else ec2.SubnetType.PRIVATE_WITH_EGRESS
            )
            vpc_subnets = ec2.SubnetSelection(subnet_type=subnet_type)
        public_ip = own_network if assign_public_ip is None else assign_public_ip
        self.security_group: ec2.ISecurityGroup | None = None
        if security_groups is None:
            self.security_group = ec2.SecurityGroup(
                self,
                "SecurityGroup",
                vpc=self.cluster.vpc,
                description="pail Fargate workers: no inbound traffic",
                allow_all_outbound=True,
            )
            security_groups = [self.security_group]

        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "TaskDefinition",
            cpu=cpu,
            memory_limit_mib=memory_limit_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=cpu_architecture,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        queue.grant_consume(self.task_definition.task_role)
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        runtime_env = {
            config.ENV_HANDLER: handler,
            config.ENV_GRACE_PERIOD: seconds(grace),
            # Only a service's tasks can be protected (a RunTask task gets TASK_NOT_VALID).
            config.ENV_TASK_PROTECTION: str(parsed_mode is FargateWorkerMode.SERVICE).lower(),
            # No reclaim pass in the task: the queue's scheduled reaper reclaims. A one-shot
            # task would LIST run/ once per task, a service's task twice a minute (at the
            # default 30 s timeout), for leases the reaper handles every reaper_schedule.
            config.ENV_RECLAIM: "false",
        }
        if max_jobs is not None:
            runtime_env[config.ENV_MAX_JOBS] = str(max_jobs)
        if time_budget is not None:
            runtime_env[config.ENV_TIME_BUDGET] = seconds(time_budget)
        entry_point = "work-once" if self.mode is FargateWorkerMode.ONCE else "work"
        self.container = self.task_definition.add_container(
            "worker",
            image=image,
            command=["pail", entry_point, "--handler", handler],
            environment=merge_environment(environment, queue.environment, runtime_env),
            logging=ecs.LogDrivers.aws_logs(stream_prefix="pail", log_group=self.log_group),
            stop_timeout=stop_timeout,
        )
        nag.acknowledge(self.task_definition, nag.ECS2, ECS2_REASON)
        nag.acknowledge(
            self.task_definition.obtain_execution_role(),
            f"{nag.IAM5}[Resource::*]",
            ECR_TOKEN_REASON,
        )

        if self.mode is FargateWorkerMode.SERVICE:
            self._grant_task_protection()

        self.enqueue_rule: events.Rule | None = None
        self.schedule_rule: events.Rule | None = None
        self.service: ecs.FargateService | None = None
        self.scaling: QueueScaling | None = None
        self.wake: ServiceWake | None = None
        if self.mode is FargateWorkerMode.SERVICE:
            self.service = ecs.FargateService(
                self,
                "Service",
                cluster=self.cluster,
                task_definition=self.task_definition,
                # An auto scaling service's count is left out of the template, so that a
                # deployment keeps the count its policy set (ECS starts a new service at 1).
                desired_count=_fixed_count(desired_count) if max_tasks is None else None,
                vpc_subnets=vpc_subnets,
                security_groups=list(security_groups),
                assign_public_ip=public_ip,
                circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
                min_healthy_percent=100,
                max_healthy_percent=200,
            )
            if max_tasks is not None:
                fewest = 0 if min_tasks is None else min_tasks
                self.scaling = QueueScaling(
                    self,
                    "Scaling",
                    queue=queue,
                    service=self.service,
                    min_tasks=fewest,
                    max_tasks=max_tasks,
                    steps=DEFAULT_SCALING_STEPS if scaling_steps is None else scaling_steps,
                    scale_out_after=scale_out_after,
                    scale_in_after=scale_in_after,
                    scale_out_cooldown=scale_out_cooldown,
                )
                if fewest == 0 and trigger_on_enqueue and not queue.sends_events:
                    queue.note_no_events(
                        self,
                        "the scale-out alarm starts the service from 0 tasks once a job has "
                        "waited scale_out_after and the reaper has published it (keep "
                        "min_tasks=1 for a faster start)",
                    )
                elif fewest == 0 and trigger_on_enqueue:
                    self.wake = ServiceWake(
                        self, "Wake", queue=queue, service=self.service, log_retention=log_retention
                    )
            return

        if queue.concurrency is not None and (trigger_on_enqueue or schedule is not None):
            # An EventBridge RunTask target has no cap: the one start it can make per event
            # is the only lever, and the limit only holds inside the tasks.
            Annotations.of(self).add_warning_v2(
                ONCE_MODE_LIMIT,
                f"mode='once' starts a Fargate task per enqueued job and per schedule tick, "
                f"whatever the queue's concurrency limit ({queue.concurrency}): a task started "
                "past it finds every slot taken and exits 'limited' (billed its minimum minute), "
                "and its job waits for a later task. mode='service' with max_tasks (capped at "
                "the limit) starts none past it.",
            )

        def run_task() -> targets.EcsTask:
            return targets.EcsTask(
                cluster=self.cluster,
                task_definition=self.task_definition,
                task_count=1,
                subnet_selection=vpc_subnets,
                security_groups=list(security_groups),
                assign_public_ip=public_ip,
                platform_version=ecs.FargatePlatformVersion.LATEST,
            )

        if trigger_on_enqueue and not queue.sends_events:
            queue.note_no_events(self, "the schedule starts tasks")
        elif trigger_on_enqueue:
            self.enqueue_rule = events.Rule(
                self,
                "OnEnqueue",
                description=f"Starts a pail task when a job is enqueued on {queue.queue_dimension!r}.",
                event_pattern=queue.enqueued_event_pattern(),
                targets=[run_task()],
            )
        if schedule is not None:
            self.schedule_rule = events.Rule(
                self,
                "Schedule",
                description=f"Starts a pail task for {queue.queue_dimension!r} on a schedule.",
                schedule=events.Schedule.rate(schedule),
                targets=[run_task()],
            )
        self._acknowledge_events_role()

    def _grant_task_protection(self) -> None:
        """Let a task protect itself: ``ecs:UpdateTaskProtection`` on this cluster's tasks only.

        The agent's endpoint makes the call with the task role's credentials;
        the runner only sets and clears (a PUT), never reads the state (which
        would need ``ecs:GetTaskProtection``).
        """
        stack = Stack.of(self)
        tasks = stack.format_arn(
            service="ecs",
            resource="task",
            resource_name=f"{self.cluster.cluster_name}/*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        role = self.task_definition.task_role
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecs:UpdateTaskProtection"], resources=[tasks])
        )
        nag.acknowledge_wildcard_resources(role, [tasks], PROTECT_TASKS_REASON)

    def _acknowledge_events_role(self) -> None:
        role = self.task_definition.node.try_find_child("EventsRole")
        if role is None:
            return
        stack = Stack.of(self)
        cluster = nag.render_for_nag(stack.resolve(self.cluster.cluster_name))
        arn = f"arn:<AWS::Partition>:ecs:<AWS::Region>:*:task/{cluster}/*"
        nag.acknowledge(role, f"{nag.IAM5}[Resource::{arn}]", TAG_TASKS_REASON)

    def _new_cluster(self, *, express: bool) -> ecs.Cluster:
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH)
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)
            ],
            gateway_endpoints=_gateway_endpoints(express),
            flow_logs={
                "Rejected": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                    traffic_type=ec2.FlowLogTrafficType.REJECT,
                )
            },
        )
        return ecs.Cluster(
            self,
            "Cluster",
            vpc=vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED,
        )


def _gateway_endpoints(express: bool) -> dict[str, ec2.GatewayVpcEndpointOptions]:
    """S3's gateway endpoint, and S3 Express's for a directory bucket (its zonal endpoint)."""
    endpoints = {"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)}
    if express:
        endpoints["S3Express"] = ec2.GatewayVpcEndpointOptions(
            service=ec2.GatewayVpcEndpointAwsService.S3_EXPRESS
        )
    return endpoints
