"""Wake a pail Fargate service from zero tasks when a job is enqueued.

The handler of the wake-up function ``pail_cdk.wake.ServiceWake`` deploys
inline (as ``index.py``; it imports nothing of pail or of the CDK). An
EventBridge rule invokes it on each *Object Created* under the queue's
``queue/``. It reads the service's desired count and, only if that is 0,
sets it to ``PAIL_WAKE_TASKS`` (1): a service that has tasks is the scaling
policy's to size, so a wake-up never lowers a count the policy raised, and
never raises one the policy is about to lower (the policy scales in only
while tasks run, and a service at 0 runs none).
"""

from __future__ import annotations

import json
import os
from typing import Any

ENV_CLUSTER = "PAIL_WAKE_CLUSTER"
ENV_SERVICE = "PAIL_WAKE_SERVICE"
ENV_TASKS = "PAIL_WAKE_TASKS"

_client: Any = None


def handler(event: Any, context: Any) -> dict[str, Any]:
    """Raise the service's desired count from 0 to ``PAIL_WAKE_TASKS``; leave any other count."""
    global _client
    if _client is None:
        import boto3

        _client = boto3.client("ecs")
    cluster, service = os.environ[ENV_CLUSTER], os.environ[ENV_SERVICE]
    tasks = int(os.environ.get(ENV_TASKS, "1"))
    found = _client.describe_services(cluster=cluster, services=[service])
    services = found.get("services") or []
    if not services:
        raise LookupError(f"no service {service} in cluster {cluster}: {found.get('failures')}")
    desired = int(services[0]["desiredCount"])
    woken = desired == 0
    if woken:
        _client.update_service(cluster=cluster, service=service, desiredCount=tasks)
    result = {"woken": woken, "desired": tasks if woken else desired}
    detail = event.get("detail") if isinstance(event, dict) else None
    found_object = detail.get("object") if isinstance(detail, dict) else None
    key = found_object.get("key") if isinstance(found_object, dict) else None
    print(json.dumps({"message": "pail service wake-up", "service": service, "key": key, **result}))
    return result
