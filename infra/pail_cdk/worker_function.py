"""``PailWorkerFunction``: the worker Lambda template around a user's handler.

**Trigger.** The queue's bucket sends its events to EventBridge
(``EventBridgeConfiguration`` on the bucket), and a rule matching *Object
Created* under ``{namespace}/queue/`` invokes the function. EventBridge rather
than a direct S3 notification because:

* one event can fan out to several targets (a Lambda worker and a Fargate
  task, or a second queue's workers), where S3 allows one notification per
  overlapping prefix and event type;
* the rule filters on the key prefix per namespace, with no overlap
  conflicts between queues that share a bucket;
* the bucket's notification configuration stays a plain property of the
  bucket, with no custom resource (and its extra Lambda function) to own it.

A schedule invokes the function as well, as a safety net: an event is a
wake-up, not the job (the job is durable in S3), so a lost or late event only
delays a job until the next tick.

**Concurrency.** ``reserved_concurrency`` (default 5) caps how many copies run.
EventBridge invokes asynchronously: a burst of 1,000 enqueues becomes 1,000
queued invocations that Lambda runs at most 5 at a time, not 1,000 concurrent
functions. Each invocation works jobs until the queue is empty or its time runs
low, so the invocations behind it find nothing to do and return at once.

**Timeouts.** A job runs inside one invocation, renewing its lease every
``visibility_timeout / 3``. The worker claims a new job only while more than
``safety_margin`` of the invocation remains, so ``safety_margin`` should cover
the longest job. If the Lambda timeout kills a job anyway, its lease stops
being renewed and the reaper hands the job to another worker at most
``visibility_timeout`` later. Hence the checks: ``safety_margin < timeout``
(or the worker never claims), and ``visibility_timeout <= timeout`` (a lease
that outlives the invocation holding it only delays recovery).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from pail import config
from pail_cdk import nag
from pail_cdk.bundling import LAMBDA_RUNTIME, pail_layers
from pail_cdk.queue import L1_REASON, PailQueue, merge_environment, seconds

DEFAULT_TIMEOUT = Duration.minutes(5)
DEFAULT_SAFETY_MARGIN = Duration.seconds(60)
DEFAULT_SCHEDULE = Duration.minutes(5)
_LAMBDA_HANDLER = re.compile(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*$")
_LAMBDA_MAX_TIMEOUT_SECONDS = 15 * 60


class PailWorkerFunction(Construct):
    """A Lambda function that works the jobs of a ``PailQueue`` with the user's handler.

    ``handler`` is the Lambda handler (``module.function``) in ``code``; the
    module exposes it as ``handler = pail.lambda_worker(run)``. The pail runtime
    (and Powertools) come from the shared runtime layer::

        PailWorkerFunction(
            self, "Worker", queue=queue, handler="report.handler",
            code=lambda_.Code.from_asset("handlers"),
        )

    Attributes: ``function``, ``role``, ``log_group``, ``enqueue_rule`` and
    ``schedule_rule`` (either may be None when switched off).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue: PailQueue,
        handler: str,
        code: lambda_.Code,
        timeout: Duration = DEFAULT_TIMEOUT,
        safety_margin: Duration = DEFAULT_SAFETY_MARGIN,
        memory_size: int = 512,
        reserved_concurrency: int | None = 5,
        max_jobs: int | None = None,
        trigger_on_enqueue: bool = True,
        schedule: Duration | None = DEFAULT_SCHEDULE,
        architecture: lambda_.Architecture | None = None,
        public_powertools_layer: bool | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        environment: Mapping[str, str] | None = None,
        description: str | None = None,
        register_with_reaper: bool = True,
    ) -> None:
        """Create the worker function and its triggers; every argument is keyword-only.

        :param queue: the queue to work.
        :param handler: the Lambda handler in ``code``, as ``module.function``.
        :param code: the user's code (``lambda_.Code.from_asset(directory)``).
        :param timeout: the Lambda timeout; at least ``queue.visibility_timeout``.
        :param safety_margin: claim no new job with less than this left; below ``timeout``.
        :param memory_size: memory in MiB.
        :param reserved_concurrency: the most copies that run at once; None for no cap.
        :param max_jobs: the most jobs one invocation works; None for no cap.
        :param trigger_on_enqueue: invoke on Object Created under ``queue/`` (not for a
            directory bucket, which sends no events).
        :param schedule: also invoke this often, as a safety net; None for no schedule.
        :param architecture: default: the queue's.
        :param public_powertools_layer: default: the queue's choice.
        :param log_retention: how long the function's logs are kept.
        :param environment: more environment variables for the handler.
        :param description: the function's description.
        :param register_with_reaper: let the reaper invoke this function when jobs wait.
        """
        # Everything is checked before the construct joins the tree.
        if not _LAMBDA_HANDLER.match(handler):
            raise ValueError(f"handler must look like 'module.function', got {handler!r}")
        _check_timing(queue, timeout, safety_margin)
        if reserved_concurrency is not None and reserved_concurrency < 1:
            raise ValueError(
                f"reserved_concurrency must be >= 1 or None, got {reserved_concurrency}"
            )
        if max_jobs is not None and max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1 or None, got {max_jobs}")
        super().__init__(scope, construct_id)
        arch = architecture or queue.architecture
        public = (
            queue.public_powertools_layer
            if public_powertools_layer is None
            else public_powertools_layer
        )

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"pail worker function of queue {queue.queue_dimension!r}.",
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self.log_group.grant_write(self.role)
        runtime_env = {
            config.ENV_SAFETY_MARGIN: seconds(safety_margin),
            # No reclaim pass in the worker: the queue's scheduled reaper reclaims every
            # reaper_schedule, and a pass here would LIST run/ once per cold start and per
            # visibility timeout of every warm container, for leases the reaper handles anyway.
            config.ENV_RECLAIM: "false",
        }
        if max_jobs is not None:
            runtime_env[config.ENV_MAX_JOBS] = str(max_jobs)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description or f"pail worker of queue {queue.queue_dimension!r}",
            runtime=LAMBDA_RUNTIME,
            architecture=arch,
            code=code,
            handler=handler,
            layers=pail_layers(self, architecture=arch, public_powertools=public),
            role=self.role,
            log_group=self.log_group,
            timeout=timeout,
            memory_size=memory_size,
            reserved_concurrent_executions=reserved_concurrency,
            # Job retries are the queue's business (max_retries, the DLQ); an
            # invocation that failed is not retried, the next event or tick comes.
            retry_attempts=0,
            environment=merge_environment(
                environment,
                queue.environment,
                runtime_env,
            ),
        )
        queue.grant_consume(self.role)
        nag.acknowledge(self.function, nag.L1, L1_REASON)

        self.enqueue_rule: events.Rule | None = None
        if trigger_on_enqueue and not queue.sends_events:
            queue.note_no_events(
                self, "the schedule and the reaper's self-heal (every minute) invoke the worker"
            )
        elif trigger_on_enqueue:
            self.enqueue_rule = events.Rule(
                self,
                "OnEnqueue",
                description=f"Wakes the pail worker when a job is enqueued on {queue.queue_dimension!r}.",
                event_pattern=queue.enqueued_event_pattern(),
                targets=[targets.LambdaFunction(self.function)],
            )
        self.schedule_rule: events.Rule | None = None
        if schedule is not None:
            self.schedule_rule = events.Rule(
                self,
                "Schedule",
                description=f"Wakes the pail worker of {queue.queue_dimension!r} on a schedule.",
                schedule=events.Schedule.rate(schedule),
                targets=[targets.LambdaFunction(self.function)],
            )
        if register_with_reaper:
            queue.set_worker_function(self.function)


def _check_timing(queue: PailQueue, timeout: Duration, safety_margin: Duration) -> None:
    timeout_s = timeout.to_seconds()
    if timeout_s > _LAMBDA_MAX_TIMEOUT_SECONDS:
        raise ValueError(f"timeout must be at most 15 minutes, got {timeout.to_human_string()}")
    if safety_margin.to_seconds() >= timeout_s:
        raise ValueError(
            f"safety_margin ({safety_margin.to_human_string()}) must be shorter than timeout "
            f"({timeout.to_human_string()}), or the worker never has time to claim a job"
        )
    if queue.visibility_timeout.to_seconds() > timeout_s:
        raise ValueError(
            f"the queue's visibility_timeout ({queue.visibility_timeout.to_human_string()}) "
            f"must not exceed the worker's timeout ({timeout.to_human_string()}): a job whose "
            "invocation timed out would wait for a lease that nobody renews; raise the "
            "timeout or shorten the visibility timeout (heartbeats keep long jobs alive)"
        )
