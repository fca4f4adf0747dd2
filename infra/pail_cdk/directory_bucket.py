"""An S3 Express One Zone directory bucket for a pail queue, and what differs in granting it.

``PailQueue(express_zone_id="use1-az4")`` creates an
``AWS::S3Express::DirectoryBucket`` in that Availability Zone, named
``{base}--{zone id}--x-s3`` (the runtime tells a directory bucket by that
suffix and lists it by continuation token, since its listings are not
ordered). What it has, beside a general purpose bucket's defaults:

* **Encryption**: SSE-S3, set explicitly. **Public access**: a directory
  bucket has no ACLs and no public access at all.
* **Lifecycle**: expiration by prefix (``done/``, ``dlq/``, ``keys/``) and
  aborting incomplete multipart uploads are supported; transitions are not.
  S3 Lifecycle deletes through a session of its own, so the bucket policy
  lets the service principal ``lifecycle.s3.amazonaws.com`` open
  ``ReadWrite`` sessions on this bucket (without it the rules do nothing).
* **No CORS** (there is no ``PutBucketCors`` for directory buckets): a
  browser on another origin cannot read a result through a presigned URL.
* **No event notifications**, so no *Object Created* for EventBridge: no
  rule can wake a worker on an enqueue (see ``docs/scaling.md``).
* **Grants are per bucket**: a directory bucket authorises object requests
  through sessions (``s3express:CreateSession`` on the bucket's ARN), not
  per action and key prefix; a role that may open a ``ReadWrite`` session
  may read, write and delete any key of the bucket. Read-only grants ask for
  ``ReadOnly`` sessions (condition ``s3express:SessionMode``). One queue per
  directory bucket keeps queues apart.
"""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3express as s3express
from constructs import Construct

from pail.keys import DEDUP, DLQ, DONE, INDEX, RATE, Keys
from pail.store.s3 import is_directory_bucket

CREATE_SESSION = "s3express:CreateSession"
SESSION_MODE = "s3express:SessionMode"
READ_ONLY, READ_WRITE = "ReadOnly", "ReadWrite"
LIFECYCLE_PRINCIPAL = "lifecycle.s3.amazonaws.com"

_ZONE_ID = re.compile(r"^[a-z]{2,4}\d+(-[a-z0-9]+)*-az\d+$")
_BASE_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?!-))*[a-z0-9]$")
_MAX_NAME = 63


def search_index_ttl(
    result_ttl: Duration | None, dlq_retention: Duration | None
) -> Duration | None:
    """How long ``_pail/index/`` entries are kept: as long as the results and dead letters they find.

    The longer of the two; None (kept) while either is kept for ever (docs/search.md, "Expiry").
    """
    if result_ttl is None or dlq_retention is None:
        return None
    return Duration.days(max(result_ttl.to_days(), dlq_retention.to_days()))


def directory_bucket_name(base: str, zone_id: str) -> str:
    """The full name of a directory bucket: ``{base}--{zone id}--x-s3``, checked.

    >>> directory_bucket_name("reports", "use1-az4")
    'reports--use1-az4--x-s3'
    """
    name = f"{base}--{zone_id}--x-s3"
    if not _BASE_NAME.match(base) or len(name) > _MAX_NAME or not is_directory_bucket(name):
        raise ValueError(
            f"express_bucket_name {base!r} must be lowercase letters, digits and single hyphens, "
            f"starting and ending with a letter or digit, and {name!r} at most {_MAX_NAME} "
            "characters"
        )
    return name


def check_zone_id(zone_id: str) -> None:
    """An Availability Zone ID (``use1-az4``), not a name (``us-east-1a``): directory buckets
    are placed by ID, which is the same zone in every account."""
    if not Token.is_unresolved(zone_id) and not _ZONE_ID.match(zone_id):
        raise ValueError(
            f"express_zone_id must be an Availability Zone ID such as 'use1-az4' (not a zone "
            f"name such as 'us-east-1a'), got {zone_id!r}"
        )


def directory_bucket_arn(scope: Construct, name: str) -> str:
    """The ARN IAM names a directory bucket by: ``arn:...:s3express:{region}:{account}:bucket/{name}``."""
    return Stack.of(scope).format_arn(service="s3express", resource="bucket", resource_name=name)


def create_directory_bucket(
    scope: Construct,
    construct_id: str,
    *,
    zone_id: str,
    base_name: str | None,
    keys: Keys,
    rule_prefix: str,
    result_ttl: Duration | None,
    dlq_retention: Duration | None,
    dedup_key_ttl: Duration | None,
) -> s3express.CfnDirectoryBucket:
    """The directory bucket (retained on stack deletion), its lifecycle and its bucket policy."""
    rules: list[Any] = []

    def expire(suffix: str, prefix: str, after: Duration | None) -> None:
        if after is not None:
            rules.append(
                s3express.CfnDirectoryBucket.RuleProperty(
                    id=f"{rule_prefix}-{suffix}",
                    status="Enabled",
                    prefix=keys.prefix(prefix),
                    expiration_in_days=after.to_days(),
                )
            )

    expire("results", DONE, result_ttl)
    expire("dead-letters", DLQ, dlq_retention)
    expire("dedup-keys", DEDUP, dedup_key_ttl)
    expire("search-index", INDEX, search_index_ttl(result_ttl, dlq_retention))
    expire("rate-tokens", RATE, Duration.days(1))  # a rate's period is at most a day
    rules.append(
        s3express.CfnDirectoryBucket.RuleProperty(
            id=f"{rule_prefix}-multipart",
            status="Enabled",
            prefix=keys.root or None,
            abort_incomplete_multipart_upload=s3express.CfnDirectoryBucket.AbortIncompleteMultipartUploadProperty(
                days_after_initiation=1
            ),
        )
    )
    bucket = s3express.CfnDirectoryBucket(
        scope,
        construct_id,
        data_redundancy="SingleAvailabilityZone",
        location_name=zone_id,
        bucket_name=None if base_name is None else directory_bucket_name(base_name, zone_id),
        bucket_encryption=s3express.CfnDirectoryBucket.BucketEncryptionProperty(
            server_side_encryption_configuration=[
                s3express.CfnDirectoryBucket.ServerSideEncryptionRuleProperty(
                    server_side_encryption_by_default=s3express.CfnDirectoryBucket.ServerSideEncryptionByDefaultProperty(
                        sse_algorithm="AES256"
                    )
                )
            ]
        ),
        lifecycle_configuration=s3express.CfnDirectoryBucket.LifecycleConfigurationProperty(
            rules=rules
        ),
    )
    bucket.apply_removal_policy(RemovalPolicy.RETAIN)
    lifecycle_sessions = iam.PolicyStatement(
        effect=iam.Effect.ALLOW,
        principals=[iam.ServicePrincipal(LIFECYCLE_PRINCIPAL)],
        actions=[CREATE_SESSION],
        resources=[bucket.attr_arn],
        conditions={"StringEquals": {SESSION_MODE: READ_WRITE}},
    )
    s3express.CfnBucketPolicy(
        scope,
        f"{construct_id}Policy",
        bucket=bucket.ref,
        policy_document=iam.PolicyDocument(statements=[lifecycle_sessions]),
    )
    return bucket


def grant_sessions(bucket_arn: str, grantee: iam.IGrantable, *, read_only: bool) -> iam.Grant:
    """Let ``grantee`` open sessions on the directory bucket: ``ReadOnly`` ones if ``read_only``."""
    conditions = {"StringEquals": {SESSION_MODE: READ_ONLY}} if read_only else None
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=[CREATE_SESSION], resource_arns=[bucket_arn], conditions=conditions
    )
