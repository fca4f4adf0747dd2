"""pail's CDK v2 construct library: a job queue in one S3 bucket, and its workers.

* ``PailQueue``: the secure bucket, the reaper on a schedule, alarms, ``grant_*``.
* ``PailWorkerFunction``: the worker Lambda around a user's handler.
* ``PailFargateWorker``: workers as Fargate tasks (one-shot or a service).

Names (key prefixes, environment variables, metrics) come from the runtime
package ``pail``, so the infrastructure and the code it runs cannot disagree.
"""

from pail_cdk.alarms import QueueAlarms
from pail_cdk.bundling import (
    LocalPipBundling,
    RuntimeBundle,
    public_powertools_layer,
    runtime_layer,
)
from pail_cdk.fargate_worker import FargateWorkerMode, PailFargateWorker
from pail_cdk.queue import PailQueue
from pail_cdk.worker_function import PailWorkerFunction

__all__ = [
    "FargateWorkerMode",
    "LocalPipBundling",
    "PailFargateWorker",
    "PailQueue",
    "PailWorkerFunction",
    "QueueAlarms",
    "RuntimeBundle",
    "public_powertools_layer",
    "runtime_layer",
]
