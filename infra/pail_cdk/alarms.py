"""CloudWatch alarms on the metrics the reaper emits (``pail.metrics_names``).

* **Dead letters**: the ``DeadLetteredJobs`` gauge is above 0. A dead-lettered
  job needs a person: fix the handler, then redrive it.
* **Stale backlog**: ``OldestPendingAgeSeconds`` is above a threshold. Jobs
  wait longer than they should: workers are missing, failing or too few.
* **Reaper errors**: the reaper function itself fails, so the two gauges above
  stop coming and expired leases are not reclaimed.

The gauges treat missing data as not breaching (a queue that never ran has no
data); the reaper-errors alarm is what catches a reaper that stopped working.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from pail import metrics_names


@dataclass(frozen=True, slots=True)
class QueueAlarms:
    """The alarms of one queue."""

    dead_letters: cloudwatch.Alarm
    oldest_pending_age: cloudwatch.Alarm
    reaper_errors: cloudwatch.Alarm

    def all(self) -> tuple[cloudwatch.Alarm, ...]:
        """Every alarm, for adding actions in one loop."""
        return (self.dead_letters, self.oldest_pending_age, self.reaper_errors)


def create_queue_alarms(
    scope: Construct,
    *,
    queue_name: str,
    metric: Callable[..., cloudwatch.Metric],
    reaper: lambda_.IFunction,
    period: Duration,
    oldest_pending_threshold: Duration,
    topic: sns.ITopic | None = None,
    actions: Sequence[cloudwatch.IAlarmAction] = (),
) -> QueueAlarms:
    """Create the three alarms of a queue; ``metric(name, ...)`` builds the queue's metrics."""
    dead_letters = cloudwatch.Alarm(
        scope,
        "DeadLettersAlarm",
        alarm_description=(
            f"pail queue {queue_name!r} has dead-lettered jobs: inspect dlq/, fix the "
            "handler, then redrive them."
        ),
        metric=metric(metrics_names.DEAD_LETTERED_JOBS, statistic="Maximum", period=period),
        threshold=0,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    oldest_pending_age = cloudwatch.Alarm(
        scope,
        "OldestPendingAgeAlarm",
        alarm_description=(
            f"pail queue {queue_name!r} has a job pending for more than "
            f"{oldest_pending_threshold.to_human_string()}: workers are missing, failing or "
            "too few."
        ),
        metric=metric(metrics_names.OLDEST_PENDING_AGE_SECONDS, statistic="Maximum", period=period),
        threshold=oldest_pending_threshold.to_seconds(),
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    reaper_errors = cloudwatch.Alarm(
        scope,
        "ReaperErrorsAlarm",
        alarm_description=(
            f"The reaper of pail queue {queue_name!r} fails: expired leases are not "
            "reclaimed and the queue metrics stop."
        ),
        metric=reaper.metric_errors(statistic="Sum", period=period),
        threshold=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    alarms = QueueAlarms(dead_letters, oldest_pending_age, reaper_errors)
    for alarm in alarms.all():
        if topic is not None:
            alarm.add_alarm_action(cloudwatch_actions.SnsAction(topic))
            alarm.add_ok_action(cloudwatch_actions.SnsAction(topic))
        for action in actions:
            alarm.add_alarm_action(action)
    return alarms
