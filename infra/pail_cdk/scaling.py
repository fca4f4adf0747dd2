"""Step scaling of a pail Fargate service on the queue's own metrics.

Modelled on aws-ecs-patterns' ``QueueProcessingFargateService``, which scales
on an SQS queue's visible messages with steps (``[{upper: 0, change: -1},
{lower: 100, change: +1}, {lower: 500, change: +5}]``). pail's metrics come
from the reaper, once per ``reaper_schedule`` (a minute by default), in
namespace ``Pail`` with the dimension ``queue``. Two policies:

* **Scale out** on the jobs that wait for a worker: ``PendingJobs`` whenever
  ``OldestPendingAgeSeconds`` is at least ``scale_out_after`` (30 s), else 0.
  The age is that of the oldest job that is due (a delayed job counts from
  its due time), so jobs delayed into the future start no task, and a job an
  idle task is about to claim (idle tasks poll every few seconds) does not
  either. Steps add tasks as the backlog grows (by default one task per
  waiting job, up to 10 at once), within ``max_tasks``.
* **Scale in** only when no task holds a job: no live lease (``LiveLeases``,
  a lease renewed within the visibility timeout) and no due job pending,
  while tasks run (the ECS service's ``CPUUtilization`` has samples), for
  ``scale_in_after`` (5 minutes); then every task above ``min_tasks`` stops.
  ECS picks which tasks to stop and knows nothing of jobs, so a policy that
  scaled in while some tasks were busy would stop busy ones: each would
  give its job back after its grace period, the attempt spent. Waiting for
  an idle service keeps a busy service at its size until the queue drains.

The scale-in alarm needs tasks to run: at zero tasks it returns to OK,
so the wake-up (``pail_cdk.wake``) that raises the service from 0 is never
undone by the alarm repeating its action (an Auto Scaling alarm acts again
every minute it stays in ALARM). The scale-in cooldown (at least three
metric periods) covers the minutes it takes the alarm to see the tasks gone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from constructs import Construct

from pail import metrics_names
from pail_cdk.queue import PailQueue

DEFAULT_SCALING_STEPS: tuple[appscaling.ScalingInterval, ...] = (
    appscaling.ScalingInterval(lower=1, change=1),
    appscaling.ScalingInterval(lower=2, change=2),
    appscaling.ScalingInterval(lower=5, change=5),
    appscaling.ScalingInterval(lower=10, change=10),
)
"""Tasks added by the number of jobs waiting: one per job, at most 10 per step."""

DEFAULT_SCALE_OUT_AFTER = Duration.seconds(30)
DEFAULT_SCALE_IN_AFTER = Duration.minutes(5)
DEFAULT_SCALE_OUT_COOLDOWN = Duration.minutes(2)
"""About how long a Fargate task takes to start and claim, plus a metric period."""

_MAX_STEPS = 20
"""Application Auto Scaling's limit on step adjustments per policy."""
_SCALE_IN_COOLDOWN_PERIODS = 3
_ECS_SCALING_ROLE = (
    "aws-service-role/ecs.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_ECSService"
)


def metric_period(queue: PailQueue) -> Duration:
    """The period of the queue's metrics: its reaper's schedule, at least a minute."""
    return Duration.seconds(max(60, int(queue.reaper_schedule.to_seconds())))


def check_scaling(
    *,
    min_tasks: int,
    max_tasks: int,
    steps: Sequence[appscaling.ScalingInterval],
    scale_out_after: Duration,
    scale_in_after: Duration,
) -> None:
    """Reject settings the policies cannot honour, before anything is created."""
    if max_tasks < 1:
        raise ValueError(f"max_tasks must be at least 1, got {max_tasks}")
    if not 0 <= min_tasks <= max_tasks:
        raise ValueError(f"min_tasks must be 0 to max_tasks ({max_tasks}), got {min_tasks}")
    if not 1 <= len(steps) <= _MAX_STEPS:
        raise ValueError(f"scaling_steps needs 1 to {_MAX_STEPS} steps, got {len(steps)}")
    previous = 0.0
    for step in steps:
        if step.lower is None or step.upper is not None:
            raise ValueError(
                "each of scaling_steps is a scale-out step: a lower bound (waiting jobs) and "
                f"a change, no upper bound; got lower={step.lower}, upper={step.upper}"
            )
        if step.lower <= previous or step.lower < 1:
            raise ValueError(
                "scaling_steps' lower bounds must start at 1 or more and increase, got "
                f"{[s.lower for s in steps]}"
            )
        if step.change < 1 or step.change != int(step.change):
            raise ValueError(f"each step adds a whole number of tasks, got change={step.change}")
        previous = step.lower
    if scale_out_after.to_seconds() < 1:
        raise ValueError("scale_out_after must be at least 1 second")
    if scale_in_after.to_seconds() < 60:
        raise ValueError("scale_in_after must be at least 1 minute")


class QueueScaling(Construct):
    """The scalable target, the two step policies and their alarms; see the module docstring.

    Attributes: ``target``, ``waiting`` and ``idle_tasks`` (the metrics the
    alarms watch), ``scale_out_action``, ``scale_out_alarm``,
    ``scale_in_action``, ``scale_in_alarm``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: PailQueue,
        service: ecs.FargateService,
        min_tasks: int,
        max_tasks: int,
        steps: Sequence[appscaling.ScalingInterval] = DEFAULT_SCALING_STEPS,
        scale_out_after: Duration = DEFAULT_SCALE_OUT_AFTER,
        scale_in_after: Duration = DEFAULT_SCALE_IN_AFTER,
        scale_out_cooldown: Duration = DEFAULT_SCALE_OUT_COOLDOWN,
    ) -> None:
        """Scale ``service`` between ``min_tasks`` and ``max_tasks`` on ``queue``'s metrics."""
        check_scaling(
            min_tasks=min_tasks,
            max_tasks=max_tasks,
            steps=steps,
            scale_out_after=scale_out_after,
            scale_in_after=scale_in_after,
        )
        super().__init__(scope, construct_id)
        name = queue.queue_dimension
        period = metric_period(queue)
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            service_namespace=appscaling.ServiceNamespace.ECS,
            scalable_dimension="ecs:service:DesiredCount",
            resource_id=f"service/{service.cluster.cluster_name}/{service.service_name}",
            min_capacity=min_tasks,
            max_capacity=max_tasks,
            # ECS's service-linked role, as BaseService.autoScaleTaskCount uses: no role to create.
            role=iam.Role.from_role_arn(
                self,
                "ServiceLinkedRole",
                Stack.of(self).format_arn(
                    service="iam", region="", resource="role", resource_name=_ECS_SCALING_ROLE
                ),
            ),
        )
        self.target.node.add_dependency(service)

        def gauge(metric_name: str) -> cloudwatch.Metric:
            return queue.metric(metric_name, statistic="Maximum", period=period)

        after = int(scale_out_after.to_seconds())
        self.waiting = cloudwatch.MathExpression(
            expression=f"IF(age >= {after}, pending, 0)",
            using_metrics={
                "age": gauge(metrics_names.OLDEST_PENDING_AGE_SECONDS),
                "pending": gauge(metrics_names.PENDING_JOBS),
            },
            period=period,
            label=f"pending jobs while one has waited {after} s or more",
        )
        self.idle_tasks = cloudwatch.MathExpression(
            expression="IF((live + IF(age > 0, pending, 0)) > 0, 0, FILL(tasks, 0))",
            using_metrics={
                "live": gauge(metrics_names.LIVE_LEASES),
                "age": gauge(metrics_names.OLDEST_PENDING_AGE_SECONDS),
                "pending": gauge(metrics_names.PENDING_JOBS),
                "tasks": service.metric_cpu_utilization(statistic="SampleCount", period=period),
            },
            period=period,
            label="tasks running while no job is held or due",
        )

        threshold = float(steps[0].lower or 1)
        self.scale_out_action = appscaling.StepScalingAction(
            self,
            "ScaleOut",
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=scale_out_cooldown,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
        )
        for index, step in enumerate(steps):
            following = steps[index + 1].lower if index + 1 < len(steps) else None
            self.scale_out_action.add_adjustment(
                adjustment=step.change,
                lower_bound=float(step.lower or threshold) - threshold,
                upper_bound=None if following is None else float(following) - threshold,
            )
        self.scale_out_alarm = cloudwatch.Alarm(
            self,
            "ScaleOutAlarm",
            alarm_description=(
                f"pail queue {name!r}: jobs have waited {after} s or more for a worker; add "
                "Fargate tasks."
            ),
            metric=self.waiting,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.MISSING,
        )
        self.scale_out_alarm.add_alarm_action(
            cloudwatch_actions.ApplicationScalingAction(self.scale_out_action)
        )

        quiet_periods = max(1, math.ceil(scale_in_after.to_seconds() / period.to_seconds()))
        cooldown = Duration.seconds(
            max(
                int(scale_in_after.to_seconds()),
                _SCALE_IN_COOLDOWN_PERIODS * int(period.to_seconds()),
            )
        )
        self.scale_in_action = appscaling.StepScalingAction(
            self,
            "ScaleIn",
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=cooldown,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
        )
        # Down to min_tasks at once: every task is idle.
        self.scale_in_action.add_adjustment(adjustment=-max_tasks, lower_bound=0)
        self.scale_in_alarm = cloudwatch.Alarm(
            self,
            "ScaleInAlarm",
            alarm_description=(
                f"pail queue {name!r}: Fargate tasks run, but none has held a job and none "
                f"was due for {scale_in_after.to_human_string()}; stop them down to {min_tasks}."
            ),
            metric=self.idle_tasks,
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=quiet_periods,
            treat_missing_data=cloudwatch.TreatMissingData.MISSING,
        )
        self.scale_in_alarm.add_alarm_action(
            cloudwatch_actions.ApplicationScalingAction(self.scale_in_action)
        )
