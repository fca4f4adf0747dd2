"""pail's CDK v2 construct library: a job queue in one S3 bucket, and its workers.

* ``PailQueue``: the secure bucket, the reaper on a schedule, alarms, ``grant_*``.
* ``PailWorkerFunction``: the worker Lambda around a user's handler.
* ``PailFargateWorker``: workers as Fargate tasks (one-shot or a service, fixed or
  auto scaling on the queue's metrics: ``QueueScaling``, ``ServiceWake``), with
  ``worker_image`` to build their image from the user's own folder.
* ``PailDashboard``: a CloudWatch dashboard of the queues, their workers and reapers.

``PailQueue(express_zone_id=...)`` puts a queue in an S3 Express One Zone
directory bucket (``pail_cdk.directory_bucket``).

Install it with ``pip install "pailq[cdk]"``. Names (key prefixes, environment
variables, metrics) come from the runtime package ``pail``, so the
infrastructure and the code it runs cannot disagree. The Lambda layer is built
from the installed pail (``pail_cdk.bundling``), never from a source tree.
"""

try:
    import aws_cdk as _aws_cdk  # noqa: F401
    import constructs as _constructs  # noqa: F401
    import packaging as _packaging  # noqa: F401
except ImportError as _missing:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(
        f"pail_cdk needs the cdk extra ({_missing.name} is missing): pip install 'pailq[cdk]'"
    ) from _missing

from pail_cdk.alarms import QueueAlarms
from pail_cdk.bundling import (
    LocalPipBundling,
    RuntimeBundle,
    public_powertools_layer,
    runtime_layer,
)
from pail_cdk.dashboard import PailDashboard
from pail_cdk.errors import LayerBuildError, PailCdkError
from pail_cdk.fargate_worker import FargateWorkerMode, PailFargateWorker
from pail_cdk.image import worker_image
from pail_cdk.queue import PailQueue
from pail_cdk.scaling import QueueScaling
from pail_cdk.wake import ServiceWake
from pail_cdk.worker_function import PailWorkerFunction

__all__ = [
    "FargateWorkerMode",
    "LayerBuildError",
    "LocalPipBundling",
    "PailCdkError",
    "PailDashboard",
    "PailFargateWorker",
    "PailQueue",
    "PailWorkerFunction",
    "QueueAlarms",
    "QueueScaling",
    "RuntimeBundle",
    "ServiceWake",
    "public_powertools_layer",
    "runtime_layer",
    "worker_image",
]
