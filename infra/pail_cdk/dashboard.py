"""``PailDashboard``: a CloudWatch dashboard of pail queues, their workers and their reaper.

One statement gives a queue its dashboard::

    PailDashboard(self, "Dashboard", queue=queue, worker_function=worker)

and ``add_queue`` puts another queue of the app on the same one (each
queue is a section of its own, headed by its name). A section holds:

* **Backlog**: ``PendingJobs`` (due jobs no worker holds) and
  ``OldestPendingAgeSeconds`` (how long the oldest due job has waited),
  from the reaper, once per ``reaper_schedule``;
* **Jobs per minute**: started (``JobsProcessed``: each handler that ran),
  failed (``JobsFailed``, released jobs included) and succeeded (started
  less failed: a job whose outcome S3 failed to record counts here until the
  reaper retries it), from the workers;
* **Dead letters**: the ``DeadLetteredJobs`` gauge, and the jobs
  dead-lettered per minute (``JobsDeadLettered``);
* **Leases**: ``LiveLeases`` (jobs a worker runs now) beside ``RunningJobs``
  (every lease, a dead worker's included), and the reaper's
  ``ExpiredLeases``;
* **Worker Lambda** (``worker_function``): its invocations, errors,
  throttles and duration;
* **Fargate service** (``fargate_worker`` in ``service`` mode): running and
  desired tasks, from Container Insights (``ECS/ContainerInsights``; the
  cluster ``PailFargateWorker`` creates has it on; a cluster of yours needs it
  for these two lines);
* **Reaper**: its runs (invocations) and errors, and the worker invocations
  it made because jobs waited (``SelfHealInvocations``).

Every pail metric is named from ``pail.metrics_names`` and selected by the
queue's ``queue`` dimension, as the alarms are (``PailQueue.metric``).
Pass ``dashboard`` to add the sections to a dashboard of your own, or
``dashboard_name`` to name the new one; never both.

Attributes: ``dashboard`` (the ``cloudwatch.Dashboard``) and ``widgets``
(every widget added, in order).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from pail import metrics_names
from pail_cdk.fargate_worker import PailFargateWorker
from pail_cdk.queue import PailQueue
from pail_cdk.scaling import metric_period
from pail_cdk.worker_function import PailWorkerFunction

PER_MINUTE = Duration.minutes(1)
WIDTH = 8
"""Three graphs to a row (a dashboard is 24 units wide)."""
HEIGHT = 6
CONTAINER_INSIGHTS = "ECS/ContainerInsights"


class PailDashboard(Construct):
    """A CloudWatch dashboard of one or more pail queues; see the module docstring."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: PailQueue,
        worker_function: PailWorkerFunction | lambda_.IFunction | None = None,
        fargate_worker: PailFargateWorker | None = None,
        dashboard: cloudwatch.Dashboard | None = None,
        dashboard_name: str | None = None,
    ) -> None:
        """Create the dashboard (or use ``dashboard``) with ``queue``'s section.

        :param queue: the queue of the first section.
        :param worker_function: the queue's worker Lambda, for its invocations, errors,
            throttles and duration.
        :param fargate_worker: the queue's Fargate workers; a service shows its tasks.
        :param dashboard: an existing dashboard to add the section to (not with
            ``dashboard_name``).
        :param dashboard_name: the new dashboard's name; default: one CloudFormation makes.
        """
        if dashboard is not None and dashboard_name is not None:
            raise ValueError(
                "PailDashboard takes an existing dashboard or dashboard_name, not both"
            )
        super().__init__(scope, construct_id)
        self.dashboard = dashboard or cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=dashboard_name
        )
        self.widgets: list[cloudwatch.IWidget] = []
        self.add_queue(queue, worker_function=worker_function, fargate_worker=fargate_worker)

    def add_queue(
        self,
        queue: PailQueue,
        *,
        worker_function: PailWorkerFunction | lambda_.IFunction | None = None,
        fargate_worker: PailFargateWorker | None = None,
    ) -> list[cloudwatch.IWidget]:
        """Add a section for ``queue`` (and its workers) below the others; its widgets."""
        gauges = metric_period(queue)

        def gauge(name: str, label: str) -> cloudwatch.Metric:
            return queue.metric(name, statistic="Maximum", period=gauges, label=label)

        def per_minute(name: str, label: str) -> cloudwatch.Metric:
            return queue.metric(name, statistic="Sum", period=PER_MINUTE, label=label)

        started = per_minute(metrics_names.JOBS_PROCESSED, "started")
        failed = per_minute(metrics_names.JOBS_FAILED, "failed")
        section: list[cloudwatch.IWidget] = [
            cloudwatch.TextWidget(
                markdown=f"## pail queue `{queue.queue_dimension}`", width=24, height=1
            ),
            _graph(
                "Backlog",
                left=[gauge(metrics_names.PENDING_JOBS, "pending jobs")],
                right=[gauge(metrics_names.OLDEST_PENDING_AGE_SECONDS, "oldest pending (s)")],
            ),
            _graph(
                "Jobs per minute",
                left=[
                    started,
                    cloudwatch.MathExpression(
                        expression="FILL(started, 0) - FILL(failed, 0)",
                        using_metrics={"started": started, "failed": failed},
                        label="succeeded",
                        period=PER_MINUTE,
                    ),
                    failed,
                ],
            ),
            _graph(
                "Dead letters",
                left=[gauge(metrics_names.DEAD_LETTERED_JOBS, "dead-lettered jobs")],
                right=[per_minute(metrics_names.JOBS_DEAD_LETTERED, "dead-lettered per minute")],
            ),
            _graph(
                "Leases",
                left=[
                    gauge(metrics_names.LIVE_LEASES, "live leases (jobs running)"),
                    gauge(metrics_names.RUNNING_JOBS, "leases (any)"),
                ],
                right=[
                    queue.metric(
                        metrics_names.EXPIRED_LEASES,
                        statistic="Sum",
                        period=gauges,
                        label="expired leases reaped",
                    )
                ],
            ),
        ]
        function = (
            worker_function.function
            if isinstance(worker_function, PailWorkerFunction)
            else worker_function
        )
        if function is not None:
            section.append(_lambda_graph("Worker Lambda", function))
        if fargate_worker is not None and fargate_worker.service is not None:
            section.append(_tasks_graph(fargate_worker.service))
        section.append(
            _graph(
                "Reaper",
                left=[
                    queue.reaper_function.metric_invocations(
                        statistic="Sum", period=gauges, label="runs"
                    ),
                    queue.reaper_function.metric_errors(
                        statistic="Sum", period=gauges, label="errors"
                    ),
                ],
                right=[
                    queue.metric(
                        metrics_names.SELF_HEAL_INVOCATIONS,
                        statistic="Sum",
                        period=gauges,
                        label="workers woken (self-heal)",
                    )
                ],
            )
        )
        self.dashboard.add_widgets(section[0])
        for start in range(1, len(section), 3):
            self.dashboard.add_widgets(*section[start : start + 3])
        self.widgets.extend(section)
        return section


def _graph(
    title: str,
    *,
    left: list[cloudwatch.IMetric],
    right: list[cloudwatch.IMetric] | None = None,
) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title, left=left, right=right or [], width=WIDTH, height=HEIGHT
    )


def _lambda_graph(title: str, function: lambda_.IFunction) -> cloudwatch.GraphWidget:
    return _graph(
        title,
        left=[
            function.metric_invocations(statistic="Sum", period=PER_MINUTE, label="invocations"),
            function.metric_errors(statistic="Sum", period=PER_MINUTE, label="errors"),
            function.metric_throttles(statistic="Sum", period=PER_MINUTE, label="throttles"),
        ],
        right=[
            function.metric_duration(statistic="Average", period=PER_MINUTE, label="duration"),
            function.metric_duration(statistic="Maximum", period=PER_MINUTE, label="max duration"),
        ],
    )


def _tasks_graph(service: ecs.FargateService) -> cloudwatch.GraphWidget:
    def tasks(name: str, label: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=CONTAINER_INSIGHTS,
            metric_name=name,
            dimensions_map={
                "ClusterName": service.cluster.cluster_name,
                "ServiceName": service.service_name,
            },
            statistic="Maximum",
            period=PER_MINUTE,
            label=label,
        )

    return _graph(
        "Fargate service",
        left=[tasks("RunningTaskCount", "running tasks"), tasks("DesiredTaskCount", "desired")],
    )
