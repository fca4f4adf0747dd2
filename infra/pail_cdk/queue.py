"""``PailQueue``: the bucket of a pail queue, its reaper, its alarms and its grants."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Annotations, Duration, RemovalPolicy, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3express as s3express
from aws_cdk import aws_sns as sns
from constructs import Construct

from pail import bounds, config, metrics_names
from pail.keys import (
    DEDUP,
    DLQ,
    DONE,
    INDEX,
    QUEUE,
    RATE,
    Keys,
    validate_namespace,
    validate_shards,
)
from pail.status_page import EXPOSED_HEADERS
from pail.store.s3 import is_directory_bucket
from pail_cdk import access, nag
from pail_cdk.alarms import QueueAlarms, create_queue_alarms
from pail_cdk.bundling import LAMBDA_RUNTIME, PYTHON_VERSION, pail_layers
from pail_cdk.directory_bucket import (
    check_zone_id,
    create_directory_bucket,
    directory_bucket_arn,
    grant_sessions,
    search_index_ttl,
)
from pail_cdk.errors import PailCdkError

REAPER_HANDLER = "pail.aws.reaper.handler"
"""The runtime's reaper Lambda handler, as ``module.function``."""

DEFAULT_VISIBILITY_TIMEOUT = Duration.seconds(config.DEFAULT_VISIBILITY_TIMEOUT)
DEFAULT_RESULT_TTL = Duration.days(7)
DEFAULT_DLQ_RETENTION = Duration.days(30)
DEFAULT_REAPER_SCHEDULE = Duration.minutes(1)
DEFAULT_REAPER_TIMEOUT = Duration.seconds(60)
DEFAULT_OLDEST_PENDING_THRESHOLD = Duration.minutes(15)
RATE_TOKEN_TTL = Duration.days(1)
"""How long a rate limit's start tokens (``_pail/rate/``) are kept: their window is over by then
(a rate's period is at most a day, ``pail.protocol.limits.rate.MAX_PER``)."""

_LAMBDA_MAX_TIMEOUT = Duration.minutes(15)
_MAX_DECLARED = 3072
"""Bytes of the reaper's environment the declared schedules may take (Lambda: 4 KB in all)."""
_EVENT_AGE_BOUNDS = (60, 6 * 3600)

L1_REASON = (
    f"The pail runtime layer is built for Python {PYTHON_VERSION}, the oldest Python pail "
    "supports; functions and layer move to a newer runtime together, deliberately."
)
S1_REASON = (
    "A pail bucket takes several requests per job (claims, lease heartbeats every "
    "visibility_timeout/3, settles), so server access logs would grow with every lease "
    "renewal; pass server_access_logs_bucket in bucket_props, or enable CloudTrail S3 data "
    "events, where an audit trail is required."
)


def declare_limits(
    *,
    concurrency: int | None = None,
    rate: str | None = None,
    group_concurrency: int | None = None,
    group_rate: str | None = None,
    groups: Mapping[str, Mapping[str, int | str]] | None = None,
) -> dict[str, Any] | None:
    """The limits object a construct declares (``PailQueue(concurrency=, rate=, ...)``), checked.

    None when nothing is declared. A bad value fails the synth with the runtime's message.

    >>> declare_limits(concurrency=5, rate="10/s", groups={"big": {"concurrency": 2}})
    {'concurrency': 5, 'groups': {'big': 2}, 'rate': {'queue': {'max': 10, 'per': 1}}}
    """
    from pail.protocol.limits.rate import Rate, RateLimits

    def count(value: object, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
            raise ValueError(f"{what} must be a whole number from 0 to 1000, got {value!r}")
        return value

    data: dict[str, Any] = {}
    if concurrency is not None:
        data["concurrency"] = count(concurrency, "concurrency")
    if group_concurrency is not None:
        data["group_concurrency"] = count(group_concurrency, "group_concurrency")
    own_counts: dict[str, int] = {}
    own_rates: dict[str, Rate] = {}
    for name, own in (groups or {}).items():
        unknown = set(own) - {"concurrency", "rate"}
        if not isinstance(name, str) or not name or unknown or not own:
            raise ValueError(
                f"groups[{name!r}] takes 'concurrency' and/or 'rate', got {dict(own)!r}"
            )
        if "concurrency" in own:
            own_counts[name] = count(own["concurrency"], f"groups[{name!r}]['concurrency']")
        if "rate" in own:
            own_rates[name] = Rate.parse(str(own["rate"]))
    if own_counts:
        data["groups"] = dict(sorted(own_counts.items()))
    rates = RateLimits(
        queue=None if rate is None else Rate.parse(rate),
        group=None if group_rate is None else Rate.parse(group_rate),
        groups=own_rates,
    )
    if rates.limited:
        data["rate"] = rates.to_json()
    return data or None


def seconds(duration: Duration) -> str:
    """A duration as the environment variables spell it: whole seconds, or a decimal."""
    value = duration.to_seconds(integral=False)
    return str(int(value)) if float(value).is_integer() else str(value)


def _struct_values(props: Any) -> dict[str, Any]:
    """The keyword arguments a jsii struct (like ``s3.BucketProps``) was built with."""
    values: dict[str, Any] = dict(props._values)
    return values


class PailQueue(Construct):
    """A pail job queue: a secure bucket, the reaper on a schedule, alarms and grants.

    One statement deploys the common case::

        queue = PailQueue(self, "Jobs")
        queue.grant_enqueue(api_function)
        queue.grant_read_results(api_function)

    Pass ``bucket`` to put the queue in an existing bucket (under ``namespace``,
    several queues can share one), or ``bucket_props`` to adjust the new bucket;
    never both. The new bucket blocks public access, enforces TLS 1.2, is
    encrypted with S3-managed keys and is retained when the stack is deleted.

    Lifecycle: results under ``done/`` expire after ``result_ttl``, dead letters
    under ``dlq/`` after ``dlq_retention``; ``queue/`` and ``run/`` never expire,
    since a job is never dropped. Incomplete multipart uploads are aborted
    after a day.

    **S3 Express One Zone**: ``express_zone_id="use1-az4"`` creates a
    directory bucket in that Availability Zone instead
    (``pail_cdk.directory_bucket`` says what differs: session grants per
    bucket, no CORS, no events). ``bucket=`` also takes an existing directory
    bucket by name (``s3.Bucket.from_bucket_name(self, "B",
    "jobs--use1-az4--x-s3")``); it is granted through sessions too.

    Attributes: ``bucket`` (a general purpose bucket's ``s3.IBucket``),
    ``directory_bucket`` (the ``CfnDirectoryBucket`` it created, else None),
    ``bucket_name``, ``express``, ``sends_events``, ``keys``, ``namespace``, ``visibility_timeout``,
    ``max_retries``, ``reaper_function``, ``reaper_role``, ``reaper_schedule`` (how
    often the reaper runs and publishes the queue's metrics), ``reaper_schedule_rule``,
    ``alarms`` and ``layers`` (the runtime layers, for functions that need them).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket | None = None,
        bucket_props: s3.BucketProps | None = None,
        express_zone_id: str | None = None,
        express_bucket_name: str | None = None,
        namespace: str = "",
        shards: int = 1,
        visibility_timeout: Duration = DEFAULT_VISIBILITY_TIMEOUT,
        max_retries: int | None = config.DEFAULT_MAX_RETRIES,
        result_ttl: Duration | None = DEFAULT_RESULT_TTL,
        dlq_retention: Duration | None = DEFAULT_DLQ_RETENTION,
        dedup_key_ttl: Duration | None = None,
        cors_allowed_origins: Sequence[str] | None = None,
        reaper_schedule: Duration = DEFAULT_REAPER_SCHEDULE,
        reaper_timeout: Duration = DEFAULT_REAPER_TIMEOUT,
        reaper_memory_size: int = 256,
        architecture: lambda_.Architecture = lambda_.Architecture.ARM_64,
        public_powertools_layer: bool = False,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        alarm_topic: sns.ITopic | None = None,
        alarm_actions: Sequence[cloudwatch.IAlarmAction] = (),
        oldest_pending_alarm_threshold: Duration = DEFAULT_OLDEST_PENDING_THRESHOLD,
        concurrency: int | None = None,
        rate: str | None = None,
        group_concurrency: int | None = None,
        group_rate: str | None = None,
        groups: Mapping[str, Mapping[str, int | str]] | None = None,
    ) -> None:
        """Create the queue; every argument is keyword-only and has a secure default.

        :param bucket: an existing bucket to hold the queue (not with ``bucket_props``).
        :param bucket_props: overrides for the new bucket's secure defaults.
        :param express_zone_id: create an S3 Express One Zone directory bucket in this
            Availability Zone ID (such as ``use1-az4``) instead of a general purpose bucket.
        :param express_bucket_name: the directory bucket's base name; it is named
            ``{base}--{zone id}--x-s3``. Default: a name CloudFormation generates.
        :param namespace: puts every key under ``{namespace}/`` so queues can share a bucket.
        :param shards: spreads the queue's keys over this many prefixes (a power of two;
            ``docs/scaling.md``); every function and task of the queue gets it as
            ``PAIL_SHARDS``. It may grow between deployments, never shrink.
        :param visibility_timeout: how long a lease lives without a heartbeat.
        :param max_retries: retries before a job is dead-lettered; None retries forever.
        :param result_ttl: how long ``done/`` results are kept; None keeps them forever.
        :param dlq_retention: how long ``dlq/`` records are kept; None keeps them forever.
        :param dedup_key_ttl: how long dedup keys (``keys/``) are remembered; None keeps them
            until ``Pail.forget_key``. It must be shorter than ``result_ttl``: a key that
            outlives its job's result would let a repeat run the job again.
        :param cors_allowed_origins: origins whose pages may GET results through presigned
            URLs. Default: any origin for a new bucket (a presigned URL is the credential),
            none for an existing one. An empty list adds no CORS rule. A directory bucket
            has no CORS configuration, so it takes none.
        :param reaper_schedule: how often the reaper runs (at least one minute).
        :param reaper_timeout: the reaper's Lambda timeout, at most ``reaper_schedule``.
        :param reaper_memory_size: the reaper's memory in MiB.
        :param architecture: the reaper's Lambda architecture.
        :param public_powertools_layer: use the public Powertools layer (its ARN resolved
            from SSM at deploy time) instead of bundling Powertools in the runtime layer.
        :param log_retention: how long the reaper's logs are kept.
        :param alarm_topic: an SNS topic told when an alarm fires and recovers.
        :param alarm_actions: more actions for when an alarm fires.
        :param oldest_pending_alarm_threshold: alarm when a job waits longer than this.
        :param concurrency: at most this many of the queue's jobs run at once, across every
            worker and entry point (``docs/limits.md``). It also caps the Fargate auto
            scaling of ``PailFargateWorker`` services of this queue.
        :param rate: at most this many job starts per period, e.g. ``"10/s"``, ``"1000/h"``.
        :param group_concurrency: at most this many jobs of any one group run at once.
        :param group_rate: at most this many starts per period of any one group.
        :param groups: a group's own limits instead of the two above, e.g.
            ``{"tenant-42": {"concurrency": 10, "rate": "5/s"}}``.

        The limits are in force after ``cdk deploy`` with no manual step: the reaper
        gets them as configuration and writes them into the bucket on its first run
        after a deploy that changed them. A limit set at run time (``pail limit``) stays
        until a later deploy declares different limits. Declaring none leaves the bucket's
        limits as they are.
        """
        # Everything is checked before the construct joins the tree.
        if bucket is not None and bucket_props is not None:
            raise ValueError("PailQueue takes an existing bucket or bucket_props, not both")
        _check_express(bucket, bucket_props, express_zone_id, express_bucket_name)
        express = express_zone_id is not None or _names_directory_bucket(bucket)
        if express and cors_allowed_origins:
            raise ValueError(
                "a directory bucket has no CORS configuration: pass no cors_allowed_origins "
                "(browsers on other origins cannot read its results through presigned URLs)"
            )
        validate_namespace(namespace)
        validate_shards(shards)
        bounds.validate_visibility_timeout(visibility_timeout.to_seconds(integral=False))
        bounds.validate_max_retries(max_retries)
        _check_reaper_timing(reaper_schedule, reaper_timeout)
        declared_limits = declare_limits(
            concurrency=concurrency,
            rate=rate,
            group_concurrency=group_concurrency,
            group_rate=group_rate,
            groups=groups,
        )
        super().__init__(scope, construct_id)
        self.concurrency = concurrency
        """The declared queue-wide concurrency limit (None: none declared)."""
        self.declared_limits = declared_limits
        """The limits this construct declares, as the reaper writes them (None: none)."""
        self.namespace = namespace
        self.shards = shards
        self.keys = Keys(namespace, shards=shards)
        self.visibility_timeout = visibility_timeout
        self.max_retries = max_retries
        self.architecture = architecture
        self.public_powertools_layer = public_powertools_layer
        self.reaper_schedule = reaper_schedule

        _check_dedup_key_ttl(dedup_key_ttl, result_ttl)
        self._bucket: s3.IBucket | None = None
        self.directory_bucket: s3express.CfnDirectoryBucket | None = None
        self._directory_arn: str | None = None
        self._imported_directory: str | None = None
        if express_zone_id is not None:
            self.directory_bucket = create_directory_bucket(
                self,
                "DirectoryBucket",
                zone_id=express_zone_id,
                base_name=express_bucket_name,
                keys=self.keys,
                rule_prefix=f"pail-{self.queue_dimension}",
                result_ttl=result_ttl,
                dlq_retention=dlq_retention,
                dedup_key_ttl=dedup_key_ttl,
            )
            self._directory_arn = self.directory_bucket.attr_arn
        elif bucket is None:
            self._bucket = self._new_bucket(bucket_props)
            origins = ["*"] if cors_allowed_origins is None else list(cors_allowed_origins)
            self._configure_bucket(origins, result_ttl, dlq_retention, dedup_key_ttl)
        elif express:
            self._imported_directory = bucket.bucket_name
            self._directory_arn = directory_bucket_arn(self, bucket.bucket_name)
            Annotations.of(self).add_warning_v2(
                "pail:ImportedBucket",
                f"PailQueue cannot configure the imported directory bucket "
                f"{bucket.bucket_name}: add lifecycle rules for done/ and dlq/ yourself, and "
                "let lifecycle.s3.amazonaws.com open ReadWrite sessions on it.",
            )
        else:
            self._bucket = bucket
            self._configure_bucket(
                list(cors_allowed_origins or []), result_ttl, dlq_retention, dedup_key_ttl
            )

        self.layers = pail_layers(
            self, architecture=architecture, public_powertools=public_powertools_layer
        )
        self.reaper_role, self.reaper_function = self._reaper(
            reaper_timeout, reaper_memory_size, reaper_schedule, log_retention
        )
        self.reaper_schedule_rule = events.Rule(
            self,
            "ReaperSchedule",
            description=f"Runs the reaper of pail queue {self.queue_dimension!r}.",
            schedule=events.Schedule.rate(reaper_schedule),
            targets=[targets.LambdaFunction(self.reaper_function)],
        )
        self.alarms: QueueAlarms = create_queue_alarms(
            self,
            queue_name=self.queue_dimension,
            metric=self.metric,
            reaper=self.reaper_function,
            period=_alarm_period(reaper_schedule),
            oldest_pending_threshold=oldest_pending_alarm_threshold,
            topic=alarm_topic,
            actions=alarm_actions,
        )
        self._worker_function: lambda_.IFunction | None = None
        self._schedules: dict[str, dict[str, Any]] = {}
        if declared_limits is not None:
            self.reaper_function.add_environment(
                config.ENV_LIMITS, json.dumps(declared_limits, separators=(",", ":"))
            )

    # -- schedules ------------------------------------------------------------

    def add_schedule(
        self,
        name: str,
        payload: Any,
        *,
        cron: str | None = None,
        every: Duration | int | None = None,
        timezone: str = "UTC",
        catch_up: int = 1,
    ) -> None:
        """Declare a schedule: ``payload`` enqueued at each tick, one job per tick.

        In force after ``cdk deploy`` with no manual step: the reaper function
        gets the declared schedules as configuration and writes them into the
        bucket on its first run, removing the ones an earlier deploy declared
        and this one does not (schedules made at run time stay). Arguments as
        ``Pail.schedule`` (``every`` may be a ``Duration``); a bad expression,
        time zone or name fails the synth with the runtime's message.
        ``docs/schedules.md``.
        """
        from pail.protocol.schedules import registry

        if name in self._schedules:
            raise PailCdkError(f"pail queue {self.queue_dimension!r} already has schedule {name!r}")
        seconds_ = every.to_seconds(integral=False) if isinstance(every, Duration) else every
        declared = registry.declaration(
            name, payload, cron=cron, every=seconds_, timezone=timezone, catch_up=catch_up
        )
        text = json.dumps([*self._schedules.values(), declared], separators=(",", ":"))
        if len(text.encode()) > _MAX_DECLARED:
            raise PailCdkError(
                f"the schedules of pail queue {self.queue_dimension!r} take {len(text)} bytes of "
                f"the reaper's environment, more than {_MAX_DECLARED} (Lambda allows 4 KB in "
                "all): keep payloads small (an id the handler looks up), or make the large "
                "ones at run time with Pail.schedule"
            )
        self._schedules[name] = declared
        self.reaper_function.add_environment(config.ENV_SCHEDULES, text)

    @property
    def schedules(self) -> list[dict[str, Any]]:
        """The schedules declared with ``add_schedule``, as the reaper gets them."""
        return list(self._schedules.values())

    # -- the bucket ---------------------------------------------------------

    def _new_bucket(self, bucket_props: s3.BucketProps | None) -> s3.Bucket:
        props: dict[str, Any] = {
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "enforce_ssl": True,
            "minimum_tls_version": 1.2,
            "encryption": s3.BucketEncryption.S3_MANAGED,
            "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            "removal_policy": RemovalPolicy.RETAIN,
        }
        user = _struct_values(bucket_props) if bucket_props is not None else {}
        # EventBridge delivery is switched on below, on the CloudFormation resource itself.
        user.pop("event_bridge_enabled", None)
        props.update(user)
        bucket = s3.Bucket(self, "Bucket", **props)
        if props.get("server_access_logs_bucket") is None and not props.get(
            "server_access_logs_prefix"
        ):
            nag.acknowledge(bucket, nag.S1, S1_REASON)
        return bucket

    @property
    def bucket(self) -> s3.IBucket:
        """The queue's general purpose bucket; an S3 Express queue has none (see ``bucket_name``)."""
        if self._bucket is None:
            raise PailCdkError(
                f"pail queue {self.queue_dimension!r} lives in an S3 Express One Zone directory "
                "bucket, which is no s3.IBucket: use bucket_name, directory_bucket and the "
                "queue's grant_* methods"
            )
        return self._bucket

    @property
    def express(self) -> bool:
        """True when the queue lives in an S3 Express One Zone directory bucket."""
        return self._directory_arn is not None

    @property
    def bucket_name(self) -> str:
        """The bucket's name (a token until deployment), whatever the kind of bucket."""
        if self.directory_bucket is not None:
            return self.directory_bucket.ref
        if self._imported_directory is not None:
            return self._imported_directory
        return self.bucket.bucket_name

    @property
    def sends_events(self) -> bool:
        """True when an enqueue reaches EventBridge as *Object Created* (a general purpose
        bucket); a directory bucket sends no event notifications at all."""
        return not self.express

    def note_no_events(self, scope: Construct, instead: str) -> None:
        """Say on ``scope`` that an enqueue wakes nothing in this queue's bucket, and what does."""
        Annotations.of(scope).add_info(
            f"pail queue {self.queue_dimension!r} is in a directory bucket, which sends no "
            f"events: no rule starts work on an enqueue; {instead}"
        )

    def _configure_bucket(
        self,
        origins: list[str],
        result_ttl: Duration | None,
        dlq_retention: Duration | None,
        dedup_key_ttl: Duration | None,
    ) -> None:
        bucket = self.bucket
        if not isinstance(bucket, s3.Bucket):
            Annotations.of(self).add_warning_v2(
                "pail:ImportedBucket",
                f"PailQueue cannot configure the imported bucket {bucket.node.path}: enable "
                "its EventBridge notifications, and add lifecycle rules for done/ and dlq/ "
                "yourself.",
            )
            return
        cfn = bucket.node.default_child
        assert isinstance(cfn, s3.CfnBucket)
        # Set on the bucket resource itself rather than through
        # Bucket(event_bridge_enabled=True), which manages the notification
        # configuration with a custom resource (an extra Lambda function and role).
        cfn.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            event_bridge_configuration=s3.CfnBucket.EventBridgeConfigurationProperty(
                event_bridge_enabled=True
            )
        )
        name = self.queue_dimension
        if result_ttl is not None:
            bucket.add_lifecycle_rule(
                id=f"pail-{name}-results",
                prefix=self.keys.prefix(DONE),
                expiration=Duration.days(result_ttl.to_days()),
            )
        if dlq_retention is not None:
            bucket.add_lifecycle_rule(
                id=f"pail-{name}-dead-letters",
                prefix=self.keys.prefix(DLQ),
                expiration=Duration.days(dlq_retention.to_days()),
            )
        if dedup_key_ttl is not None:
            bucket.add_lifecycle_rule(
                id=f"pail-{name}-dedup-keys",
                prefix=self.keys.prefix(DEDUP),
                expiration=Duration.days(dedup_key_ttl.to_days()),
            )
        index_ttl = search_index_ttl(result_ttl, dlq_retention)
        if index_ttl is not None:
            bucket.add_lifecycle_rule(
                id=f"pail-{name}-search-index",
                prefix=self.keys.prefix(INDEX),
                expiration=index_ttl,
            )
        # A rate limit's start tokens matter only in their window (a period is at most
        # a day, and S3 expires an object a day after its write at the earliest).
        bucket.add_lifecycle_rule(
            id=f"pail-{name}-rate-tokens",
            prefix=self.keys.prefix(RATE),
            expiration=RATE_TOKEN_TTL,
        )
        bucket.add_lifecycle_rule(
            id=f"pail-{name}-multipart",
            prefix=self.keys.root or None,
            abort_incomplete_multipart_upload_after=Duration.days(1),
        )
        if origins:
            bucket.add_cors_rule(
                id=f"pail-{name}-results",
                allowed_methods=[s3.HttpMethods.GET, s3.HttpMethods.HEAD],
                allowed_origins=origins,
                exposed_headers=list(EXPOSED_HEADERS),
                max_age=300,
            )

    # -- the reaper ---------------------------------------------------------

    def _reaper(
        self,
        timeout: Duration,
        memory_size: int,
        schedule: Duration,
        log_retention: logs.RetentionDays,
    ) -> tuple[iam.Role, lambda_.Function]:
        role = iam.Role(
            self,
            "ReaperRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"The reaper of pail queue {self.queue_dimension!r}.",
        )
        log_group = logs.LogGroup(self, "ReaperLogs", retention=log_retention)
        log_group.grant_write(role)
        module, function = REAPER_HANDLER.rsplit(".", 1)
        event_age = min(max(int(schedule.to_seconds()), _EVENT_AGE_BOUNDS[0]), _EVENT_AGE_BOUNDS[1])
        reaper = lambda_.Function(
            self,
            "Reaper",
            description=(
                f"pail reaper of queue {self.queue_dimension!r}: reclaims expired leases, "
                "emits queue metrics."
            ),
            runtime=LAMBDA_RUNTIME,
            architecture=self.architecture,
            code=lambda_.Code.from_inline(f"from {module} import {function} as handler\n"),
            handler="index.handler",
            layers=self.layers,
            role=role,
            log_group=log_group,
            timeout=timeout,
            memory_size=memory_size,
            # One reaper at a time: overlapping passes are safe but wasteful.
            reserved_concurrent_executions=1,
            # A missed tick is not worth a retry: the next one comes in `schedule`.
            retry_attempts=0,
            max_event_age=Duration.seconds(event_age),
            # Always set, [] too: a deploy that drops its last schedule removes it.
            environment={**self.environment, config.ENV_SCHEDULES: "[]"},
        )
        self._grant(role, access.REAP)
        nag.acknowledge(reaper, nag.L1, L1_REASON)
        return role, reaper

    def set_worker_function(self, function: lambda_.IFunction) -> None:
        """Let the reaper invoke ``function`` when it finds pending jobs and no worker running.

        ``PailWorkerFunction`` calls this for its function; a queue has at most one.
        """
        if self._worker_function is not None and self._worker_function is not function:
            raise ValueError(
                f"pail queue {self.queue_dimension!r} already has a worker function "
                f"({self._worker_function.node.path}); pass register_with_reaper=False"
            )
        self._worker_function = function
        self.reaper_function.add_environment(config.ENV_WORKER_FUNCTION, function.function_name)
        # The unqualified function only: Function.grant_invoke would add every
        # version and alias (`arn:...:function:name:*`), which the reaper never calls.
        iam.Grant.add_to_principal(
            grantee=self.reaper_role,
            actions=["lambda:InvokeFunction"],
            resource_arns=[function.function_arn],
        )

    # -- what consumers need --------------------------------------------------

    @property
    def queue_dimension(self) -> str:
        """The queue's name in metrics and descriptions: its namespace, or ``_default``."""
        return metrics_names.queue_dimension(self.namespace)

    @property
    def environment(self) -> dict[str, str]:
        """The environment variables that point the runtime at this queue."""
        env = {
            config.ENV_BUCKET: self.bucket_name,
            config.ENV_VISIBILITY_TIMEOUT: seconds(self.visibility_timeout),
            config.ENV_MAX_RETRIES: (
                config.UNLIMITED if self.max_retries is None else str(self.max_retries)
            ),
        }
        if self.namespace:
            env[config.ENV_QUEUE] = self.namespace
        # Always set, 1 too: an explicit count needs no read of the layout
        # marker, which a producer granted queue/* only may not read.
        env[config.ENV_SHARDS] = str(self.shards)
        if self.declared_limits is not None:
            # The reaper writes them; a worker Lambda looks at the limits before it claims.
            env[config.ENV_LIMITS] = json.dumps(self.declared_limits, separators=(",", ":"))
        return env

    def enqueued_event_pattern(self) -> events.EventPattern:
        """The EventBridge pattern of "a job was enqueued": Object Created under ``queue/``.

        A retry writes ``queue/{id}`` again, so it matches too. Heartbeats and
        results do not. A directory bucket sends no events (``sends_events``).
        """
        if not self.sends_events:
            raise PailCdkError(
                f"pail queue {self.queue_dimension!r} is in a directory bucket, which sends no "
                "events: nothing matches an enqueue there"
            )
        return events.EventPattern(
            source=["aws.s3"],
            detail_type=["Object Created"],
            detail={
                "bucket": {"name": [self.bucket_name]},
                "object": {"key": [{"prefix": self.keys.prefix(QUEUE)}]},
            },
        )

    def metric(self, metric_name: str, **props: Any) -> cloudwatch.Metric:
        """A metric of this queue from ``pail.metrics_names`` (props as in ``cloudwatch.Metric``)."""
        return cloudwatch.Metric(
            namespace=metrics_names.NAMESPACE,
            metric_name=metric_name,
            dimensions_map={metrics_names.DIMENSION_QUEUE: self.queue_dimension},
            **props,
        )

    # -- grants ---------------------------------------------------------------

    def grant_enqueue(self, grantee: iam.IGrantable, *, tags: bool = False) -> iam.Grant:
        """Let ``grantee`` enqueue jobs: ``s3:PutObject`` on ``queue/*``, nothing else.

        With ``tags``, also on ``_pail/index/*``: a tagged job's index entries (docs/search.md).
        """
        return self._grant(grantee, access.ENQUEUE_TAGGED if tags else access.ENQUEUE)

    def grant_enqueue_keyed(self, grantee: iam.IGrantable, *, tags: bool = False) -> iam.Grant:
        """Let ``grantee`` enqueue with dedup keys (``Pail.enqueue(key=...)``).

        Create and read ``keys/*``, create ``queue/*``, and read the job's status
        under the four state prefixes (with their listing), which a repeat of a
        key needs to find its job. ``tags`` as in ``grant_enqueue``.
        """
        return self._grant(grantee, access.ENQUEUE_KEYED_TAGGED if tags else access.ENQUEUE_KEYED)

    def grant_search(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` search jobs (``Pail.search``, ``pail jobs --tag``): read any status,
        list and read ``_pail/index/``, and delete index entries whose job is gone."""
        return self._grant(grantee, access.SEARCH)

    def grant_consume(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` work jobs: read, write and delete under this queue's four prefixes.

        Plus listing those prefixes only. Nothing outside the queue's prefixes.
        """
        return self._grant(grantee, access.CONSUME)

    def grant_read_results(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` read results: ``s3:GetObject`` on ``done/*``.

        Plus ``s3:ListBucket`` for ``done/`` only, so a result that is not there
        yet reads as missing (404) instead of forbidden (403).
        """
        return self._grant(grantee, access.READ_RESULTS)

    def grant_read_status(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` read any job's status: ``s3:GetObject`` under the four prefixes."""
        return self._grant(grantee, access.READ_STATUS)

    def _grant(self, grantee: iam.IGrantable, role: access.Access) -> iam.Grant:
        """``role``'s rights: per prefix in a general purpose bucket, sessions in a directory one."""
        if self._directory_arn is not None:
            return grant_sessions(self._directory_arn, grantee, read_only=role.read_only)
        return access.grant(self.bucket, self.keys, grantee, role)


def _names_directory_bucket(bucket: s3.IBucket | None) -> bool:
    """True for an imported bucket whose (known) name is a directory bucket's."""
    if bucket is None or Token.is_unresolved(bucket.bucket_name):
        return False
    return is_directory_bucket(bucket.bucket_name)


def _check_express(
    bucket: s3.IBucket | None,
    bucket_props: s3.BucketProps | None,
    zone_id: str | None,
    base_name: str | None,
) -> None:
    if zone_id is None:
        if base_name is not None:
            raise ValueError(
                "express_bucket_name needs express_zone_id (the directory bucket's zone)"
            )
        return
    if bucket is not None or bucket_props is not None:
        raise ValueError(
            "PailQueue creates a directory bucket for express_zone_id; pass no bucket or "
            "bucket_props with it"
        )
    check_zone_id(zone_id)


def _check_reaper_timing(schedule: Duration, timeout: Duration) -> None:
    if schedule.to_seconds() < 60:
        raise ValueError(
            f"reaper_schedule must be at least 1 minute, got {schedule.to_human_string()}"
        )
    if timeout.to_seconds() > min(schedule.to_seconds(), _LAMBDA_MAX_TIMEOUT.to_seconds()):
        raise ValueError(
            f"reaper_timeout ({timeout.to_human_string()}) must not exceed reaper_schedule "
            f"({schedule.to_human_string()}) or 15 minutes: a pass must end before the next"
        )


def _alarm_period(schedule: Duration) -> Duration:
    """At least one reaper run per alarm period, and at least five minutes."""
    return Duration.seconds(max(300, int(schedule.to_seconds())))


def merge_environment(*parts: Mapping[str, str] | None) -> dict[str, str]:
    """Merge environment mappings; later ones win."""
    merged: dict[str, str] = {}
    for part in parts:
        merged.update(part or {})
    return merged


def _check_dedup_key_ttl(dedup_key_ttl: Duration | None, result_ttl: Duration | None) -> None:
    if dedup_key_ttl is None or result_ttl is None:
        return
    if dedup_key_ttl.to_days() >= result_ttl.to_days():
        raise ValueError(
            f"dedup_key_ttl ({dedup_key_ttl.to_days()} days) must be shorter than result_ttl "
            f"({result_ttl.to_days()} days): a key that outlives its job's result would let a "
            "repeated enqueue run the job again"
        )
