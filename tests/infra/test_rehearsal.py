"""The deploy rehearsal: a user's app, from the wheel to its functions running under awslambdaric.

See ``tests/infra/rehearsal``. The stage (wheel, fresh venv with ``[cdk]``,
the app of ``docs/deploy.md`` synthesised by the CDK CLI in a temporary
folder, a bare Python 3.12 with awslambdaric) is built once per session; each
test then runs functions from the cloud assembly against the local S3 server,
through the proxy that enforces each role's policy from the template.

The last tests break one thing each (the handler string, an IAM action, a
dependency in the layer) and show that the rehearsal catches it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import boto3
import pytest

from pail import Pail
from pail.keys import RUN
from pail.local import LocalS3
from pail.status import JobState
from pail_cdk.wake_handler import ENV_CLUSTER, ENV_SERVICE
from tests.support.ecs_agent import EcsAgentDouble
from tests.support.waiting import wait_until

from .rehearsal import toolchain
from .rehearsal.assembly import FunctionSpec
from .rehearsal.proxy import AwsProxy, Request
from .rehearsal.runtime_api import FunctionFailedError, FunctionInstance
from .rehearsal.stage import REAPER_HANDLER, WORKER_HANDLER, NoLambdaPythonError, Stage

# The least-privilege table gathers the requests of every scenario of this
# module in its process: scripts/test runs each file whole on one xdist worker
# (--dist loadfile).
# The stage (wheel, venv, CDK synth) is built in whichever test runs first: at load ~13
# on 2 cores that test took 234 s of pytest's 300 s default; the bound only stops a hang.
pytestmark = [pytest.mark.slow, pytest.mark.s3, pytest.mark.synth, pytest.mark.timeout(1800)]

ROOT = toolchain.ROOT
SCHEDULE = {
    "version": "0",
    "id": "rehearsal-schedule",
    "source": "aws.events",
    "account": "123456789012",
    "region": "us-east-1",
    "detail-type": "Scheduled Event",
    "resources": [],
    "detail": {},
}
# The reaper scenario's only departures from the template: an abandoned lease
# expires after 2 s (not 30), and the self-heal acts on a job waiting 1 s (not 60).
REAPER_OVERRIDES = {"PAIL_VISIBILITY_TIMEOUT": "2", "PAIL_SELF_HEAL_AFTER_SECONDS": "1"}


def object_created(bucket: str, key: str) -> dict[str, Any]:
    """An S3 Object Created event as EventBridge delivers it."""
    return {
        "version": "0",
        "id": "rehearsal-event",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": "123456789012",
        "time": "2025-01-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {"key": key, "size": 64, "etag": "0", "sequencer": "0"},
            "request-id": "0",
            "requester": "123456789012",
            "reason": "PutObject",
        },
    }


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory, s3_server: LocalS3) -> Stage:
    bucket = f"reports-{os.getpid()}"
    try:
        built = Stage.build(tmp_path_factory.mktemp("rehearsal"), bucket=bucket)
    except NoLambdaPythonError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    kwargs = s3_server.connect_kwargs()
    boto3.client(
        "s3",
        endpoint_url=kwargs["endpoint_url"],
        aws_access_key_id=kwargs["access_key_id"],
        aws_secret_access_key=kwargs["secret_access_key"],
        region_name=kwargs["region"],
    ).create_bucket(Bucket=bucket)
    built.write_report("build_seconds", built.timings)
    return built


@pytest.fixture(scope="module")
def usage() -> Iterator[list[Request]]:
    """Every request the passing scenarios made, for the least-privilege report."""
    records: list[Request] = []
    yield records


@pytest.fixture
def proxy(stage: Stage, s3_server: LocalS3) -> Iterator[AwsProxy]:
    with AwsProxy(s3_server.endpoint_url, stage.policies()) as running:
        yield running


def queue_of(stage: Stage, s3_server: LocalS3, namespace: str = "") -> Pail:
    """The queue in the app's bucket, reached directly (as an administrator would)."""
    return Pail.connect(stage.bucket, queue=namespace, **s3_server.connect_kwargs())  # type: ignore[arg-type]


# --- the app, as the user synthesised it ---------------------------------------------


def test_given_the_wheel_when_the_user_app_synthesises_then_only_the_installed_pail_is_used(
    stage: Stage,
) -> None:
    assert not stage.app.folder.is_relative_to(ROOT)
    probe = subprocess.run(
        [
            str(stage.app.python),
            "-c",
            "import json, sys, pail, pail_cdk; print(json.dumps([pail.__file__, pail_cdk.__file__, sys.path]))",
        ],
        cwd=stage.app.folder,
        env=toolchain.clean_env([stage.app.venv / "bin"]),
        capture_output=True,
        text=True,
        check=True,
    )
    pail_file, cdk_file, path = json.loads(probe.stdout.splitlines()[-1])
    assert Path(pail_file).is_relative_to(stage.app.venv)
    assert Path(cdk_file).is_relative_to(stage.app.venv)
    assert not [entry for entry in path if entry and Path(entry).is_relative_to(ROOT)]

    report = json.loads((stage.app.cdk_out / "validation-report.json").read_text())
    violations = [v for r in report.get("pluginReports", []) for v in r.get("violations", [])]
    assert violations == []
    metadata = json.loads((stage.app.cdk_out / "Reports.metadata.json").read_text())
    reasons = [
        reason
        for entries in metadata.values()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in entry["data"].items()
        if "AwsSolutions-" in rule
    ]
    assert reasons and all(len(reason.split()) >= 10 for reason in reasons)
    kinds = Counter(r["Type"] for r in stage.assembly.template["Resources"].values())
    assert kinds["AWS::S3::Bucket"] == 1
    # The worker, the two queues' reapers, and the wake-up of the Fargate service.
    assert kinds["AWS::Lambda::Function"] == 4
    assert kinds["AWS::ECS::TaskDefinition"] == 1
    assert kinds["AWS::ECS::Service"] == 1
    assert kinds["AWS::ApplicationAutoScaling::ScalableTarget"] == 1
    assert kinds["AWS::ApplicationAutoScaling::ScalingPolicy"] == 2
    assert kinds["AWS::CloudWatch::Dashboard"] == 1


def test_given_the_synthesised_layer_then_it_holds_the_wheel_s_pail_with_bytecode_and_no_cli(
    stage: Stage,
) -> None:
    import importlib.metadata
    import zipfile

    (layer,) = set(stage.assembly.function(WORKER_HANDLER).layers)
    site = layer / "python"
    (dist,) = [
        d
        for d in importlib.metadata.distributions(path=[str(site)])
        if d.metadata["Name"] == "pailq"
    ]
    with zipfile.ZipFile(stage.wheel) as wheel:
        (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        wheel_metadata = wheel.read(metadata).decode()
        wheel_files = {n for n in wheel.namelist() if n.startswith("pail/")}
    assert dist.read_text("METADATA") == wheel_metadata
    layer_files = {str(PurePosixPath(p.relative_to(site))) for p in (site / "pail").rglob("*.py")}
    assert layer_files and layer_files <= wheel_files
    assert {f for f in wheel_files - layer_files if f.endswith(".py")} >= {"pail/cli/__init__.py"}
    for absent in ("click", "rich", "pygments", "moto", "pail/cli"):
        assert not (site / absent).exists(), absent
    assert (site / "pail" / "__pycache__" / "queue.cpython-312.pyc").is_file()
    assert (site / "boto3" / "__pycache__" / "__init__.cpython-312.pyc").is_file()


# --- the functions, run from the cloud assembly --------------------------------------


def test_given_pending_jobs_when_the_worker_gets_an_object_created_event_then_it_drains_them(
    stage: Stage, s3_server: LocalS3, proxy: AwsProxy, usage: list[Request]
) -> None:
    pail = queue_of(stage, s3_server)
    reports = [pail.enqueue({"report_id": f"r{n}", "rows": [1] * n}) for n in range(5)]
    poison = pail.enqueue({"report_id": "broken", "poison": True})
    spec = stage.assembly.function(WORKER_HANDLER)

    with stage.running(spec, proxy) as worker:
        summary = worker.invoke(object_created(stage.bucket, pail.keys.queue(reports[0])))
        first = worker.api.by_id[next(iter(worker.api.by_id))]
        cold = {"init": worker.init_seconds, "first_invocation": first.duration}

    assert proxy.denied() == []
    assert summary["trigger"] == "eventbridge-s3"
    assert summary["stop_reason"] == "empty"
    assert summary["succeeded"] == 5 and summary["dead_lettered"] == 1
    assert [pail.result(job) for job in reports] == [
        {"report_id": f"r{n}", "rows": n} for n in range(5)
    ]
    status = pail.status(poison)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and "cannot be built" in status.error.message
    usage.extend(proxy.snapshot())
    stage.write_report("worker_cold_start_seconds", cold)


def _logged_jobs(output: str, message: str) -> list[str]:
    """The job ids of a function's JSON log lines whose message is ``message``."""
    found = []
    for line in output.splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("message") == message and "job_id" in record:
            found.append(record["job_id"])
    return found


def test_given_a_drained_queue_when_an_event_names_a_job_already_run_then_one_cheap_request(
    stage: Stage, s3_server: LocalS3, proxy: AwsProxy, usage: list[Request]
) -> None:
    pail = queue_of(stage, s3_server)
    job = pail.enqueue({"report_id": "ran-already", "rows": [1]})
    assert pail.work_once(lambda payload: {"by": "another worker"})  # its event is late
    spec = stage.assembly.function(WORKER_HANDLER)

    with stage.running(spec, proxy) as worker:
        summary = worker.invoke(object_created(stage.bucket, pail.keys.queue(job)))

    calls = [(c.operation, c.status) for c in proxy.s3_calls(spec.role)]
    print(f"\ndrained wake-up: {calls}")
    stage.write_report("drained_wake_up", {"requests": [f"{op} {status}" for op, status in calls]})
    assert proxy.denied() == []
    assert (summary["processed"], summary["stop_reason"]) == (0, "empty")
    assert calls == [("GetObject", 404)]
    usage.extend(proxy.snapshot())


BURST_JOBS = 100
BURST_WORKERS = 10


def test_given_a_burst_of_enqueues_when_ten_workers_take_the_events_then_each_job_runs_once(
    stage: Stage, s3_server: LocalS3, proxy: AwsProxy, usage: list[Request]
) -> None:
    pail = queue_of(stage, s3_server)
    spec = stage.assembly.function(WORKER_HANDLER)
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()
    summaries: list[dict[str, Any]] = []
    failures: list[BaseException] = []
    ids: list[str] = []

    def serve(worker: FunctionInstance) -> None:
        # Lambda's asynchronous queue: each instance takes the next event once it is free.
        while (event := events.get()) is not None:
            try:
                summaries.append(worker.invoke(event))
            except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
                failures.append(exc)

    with contextlib.ExitStack() as running:
        workers = [running.enter_context(stage.running(spec, proxy)) for _ in range(BURST_WORKERS)]
        threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in workers]
        for thread in threads:
            thread.start()
        try:
            for n in range(BURST_JOBS):
                ids.append(pail.enqueue({"report_id": f"burst-{n}", "rows": [1] * (n % 4)}))
                events.put(object_created(stage.bucket, pail.keys.queue(ids[-1])))
        finally:
            for _ in threads:
                events.put(None)
            for thread in threads:
                thread.join(timeout=600)
        outputs = [worker.output() for worker in workers]

    assert not failures, failures[0]
    assert proxy.denied() == []
    ran = Counter(job for output in outputs for job in _logged_jobs(output, "job succeeded"))
    calls = Counter(c.operation for c in proxy.s3_calls(spec.role))
    idle = sum(1 for s in summaries if s["processed"] == 0)
    figures = {
        "invocations": len(summaries),
        "jobs_run": sum(ran.values()),
        "ran_twice": sorted(job for job, times in ran.items() if times > 1),
        "invocations_without_a_job": idle,
        "requests": sum(calls.values()),
        "requests_per_job": round(sum(calls.values()) / BURST_JOBS, 2),
        "by_operation": dict(sorted(calls.items())),
    }
    print(f"\nburst of {BURST_JOBS} enqueues, {BURST_WORKERS} concurrent workers: {figures}")
    stage.write_report("worker_burst", figures)
    assert len(summaries) == BURST_JOBS
    assert set(ran) == set(ids) and figures["ran_twice"] == []
    assert sum(s["succeeded"] for s in summaries) == BURST_JOBS
    for n, job in enumerate(ids):
        assert pail.result(job) == {"report_id": f"burst-{n}", "rows": n % 4}
    usage.extend(proxy.snapshot())


def _crash_after_claim(s3_server: LocalS3, bucket: str) -> str:
    """A worker process that claims one job and is SIGKILLed holding its lease; the job's id."""
    code = (
        "import os, signal, sys; from pail import Pail; "
        f"m = Pail.connect({bucket!r}, **{s3_server.connect_kwargs()!r}).claim(); "
        "print(m.id, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done.stdout.strip()


def test_given_an_abandoned_lease_when_the_reaper_runs_on_schedule_then_it_reaps_and_self_heals(
    stage: Stage, s3_server: LocalS3, proxy: AwsProxy, usage: list[Request]
) -> None:
    pail = queue_of(stage, s3_server)
    abandoned_id = pail.enqueue({"report_id": "abandoned", "rows": [1, 2]})
    assert _crash_after_claim(s3_server, stage.bucket) == abandoned_id
    waiting_id = pail.enqueue({"report_id": "waiting", "rows": [1]})

    def lease_expired() -> bool:
        page = pail.store.list(pail.keys.prefix(RUN), max_keys=10)
        return all(
            (page.server_time - item.last_modified).total_seconds() > 3.5 for item in page.items
        )

    wait_until(
        lease_expired, timeout=20, what="the abandoned lease to expire on the server's clock"
    )
    worker_spec = stage.assembly.function(WORKER_HANDLER)
    reaper_spec = _reaper_of(stage, queue="")
    healed = []

    with stage.running(worker_spec, proxy) as worker:

        def on_invoke(name: str, body: bytes, kind: str) -> None:
            assert name == worker_spec.name and kind == "Event"
            healed.append(worker.submit(json.loads(body)))

        proxy.on_invoke = on_invoke
        with stage.running(reaper_spec, proxy, environment=REAPER_OVERRIDES) as reaper:
            summary = reaper.invoke(SCHEDULE)
            cold = {
                "init": reaper.init_seconds,
                "first_invocation": next(iter(reaper.api.by_id.values())).duration,
            }
        assert len(healed) == 1, summary
        drained = worker.wait(healed[0]).result

    assert proxy.denied() == []
    assert summary["reap"]["expired"] == 1 and summary["reap"]["requeued"] == 1
    assert summary["self_heal"]["invoked"] is True
    assert summary["self_heal"]["function"] == worker_spec.name
    assert drained["trigger"] == "self-heal" and drained["succeeded"] == 2
    abandoned = pail.status(abandoned_id)
    assert abandoned is not None and abandoned.state is JobState.DONE and abandoned.attempts == 2
    assert pail.result(waiting_id) == {"report_id": "waiting", "rows": 1}
    assert [r for r in proxy.snapshot() if r.service == "lambda"] == [
        Request(reaper_spec.role, "lambda", "lambda:InvokeFunction", worker_spec.arn, True, 202)
    ]
    usage.extend(proxy.snapshot())
    stage.write_report("reaper_cold_start_seconds", cold)


# A process that runs one pail call and is SIGKILLed just before its first DELETE under
# a prefix (after the writes before it have landed), printing the key it was about to delete.
_KILLED_BEFORE_DELETE = """
import os, signal, sys
from pail import Pail

class KilledBeforeDelete:
    def __init__(self, inner, prefix):
        self.inner, self.prefix = inner, prefix
    def __getattr__(self, name):
        return getattr(self.inner, name)
    def delete(self, key, *, if_match=None):
        if key.startswith(self.prefix):
            print(key, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.delete(key, if_match=if_match)

bucket, kwargs, state, call = sys.argv[1], eval(sys.argv[2]), sys.argv[3], sys.argv[4:]
admin = Pail.connect(bucket, **kwargs)
pail = Pail(KilledBeforeDelete(admin.store, admin.keys.prefix(state)))
pail.claim() if call == ["claim"] else pail.redrive(call[1])
"""


def _killed_before_delete(s3_server: LocalS3, bucket: str, state: str, *call: str) -> str:
    """Run ``pail.claim()`` or ``pail.redrive(id)``, SIGKILLed before it deletes under ``state``/.

    Returns the key it was about to delete: what it wrote before that stays, half done.
    """
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_BEFORE_DELETE,
            bucket,
            repr(s3_server.connect_kwargs()),
            state,
            *call,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    return done.stdout.strip()


def test_given_a_claim_killed_before_its_entry_delete_when_the_reaper_runs_then_it_takes_the_entry(
    stage: Stage, s3_server: LocalS3, proxy: AwsProxy, usage: list[Request]
) -> None:
    """Reap step 4 (a claim that wrote its lease and died before deleting the entry), also on a
    job whose redrive stopped after its commit point: the reaper deletes the claim's entry, the
    old life's dead letter and its dead marker, with only the rights its role was granted."""
    pail = queue_of(stage, s3_server)
    admin = Pail.connect(stage.bucket, max_retries=0, **s3_server.connect_kwargs())  # type: ignore[arg-type]
    # Job B: dead, then a redrive killed after writing life 1's entry, then a claim of life 1
    # killed after writing its lease: entry, lease, dead letter and dead marker all stand.
    redriven = admin.enqueue({"report_id": "redriven", "rows": [1]})
    message = admin.claim()
    assert message is not None and message.id == redriven
    message.fail(RuntimeError("first life"))
    assert _killed_before_delete(s3_server, stage.bucket, "dlq", "redrive", redriven).endswith(
        redriven
    )
    assert _killed_before_delete(s3_server, stage.bucket, "queue", "claim") == pail.keys.queue(
        redriven
    )
    # Job A: a plain claim killed between its lease write and its entry delete.
    crashed = pail.enqueue({"report_id": "crashed", "rows": [1, 2, 3]})
    assert _killed_before_delete(s3_server, stage.bucket, "queue", "claim") == pail.keys.queue(
        crashed
    )

    def leases_expired() -> bool:
        page = pail.store.list(pail.keys.prefix(RUN), max_keys=10)
        return len(page.items) == 2 and all(
            (page.server_time - item.last_modified).total_seconds() > 3.5 for item in page.items
        )

    wait_until(leases_expired, timeout=20, what="both crashed claims' leases to expire")
    reaper_spec = _reaper_of(stage, queue="")
    with stage.running(reaper_spec, proxy, environment=REAPER_OVERRIDES) as reaper:
        summary = reaper.invoke(SCHEDULE)

    assert proxy.denied() == []
    assert summary["reap"]["expired"] == 2 and summary["reap"]["requeued"] == 2
    for job in (crashed, redriven):
        status = pail.status(job)
        assert status is not None and status.state is JobState.PENDING, (job, status)
    assert pail.store.head(pail.keys.dlq(redriven)) is None
    assert pail.store.head(pail.keys.done(redriven)) is None
    reaper_deletes = {
        r.resource.rsplit("/", 2)[-2]
        for r in proxy.snapshot()
        if r.role == reaper_spec.role and r.action == "s3:DeleteObject"
    }
    assert reaper_deletes == {"queue", "run", "done", "dlq"}
    usage.extend(proxy.snapshot())
    proxy.clear()

    with stage.running(stage.assembly.function(WORKER_HANDLER), proxy) as worker:
        drained = worker.invoke(SCHEDULE)
    assert proxy.denied() == []
    assert drained["succeeded"] == 2
    assert pail.result(crashed) == {"report_id": "crashed", "rows": 3}
    assert pail.result(redriven) == {"report_id": "redriven", "rows": 1}
    usage.extend(proxy.snapshot())


def _reaper_of(stage: Stage, *, queue: str) -> FunctionSpec:
    (spec,) = [
        f
        for f in stage.assembly.functions().values()
        if f.handler == REAPER_HANDLER
        and "PAIL_BUCKET" in f.environment  # not the wake-up, which is inline code too
        and f.environment.get("PAIL_QUEUE", "") == queue
    ]
    return spec


# --- the Fargate task, from its image's build context ----------------------------------


def test_given_the_fargate_task_when_its_command_runs_from_the_image_context_then_it_works_a_job(
    stage: Stage, s3_server: LocalS3, proxy: AwsProxy, usage: list[Request], tmp_path: Path
) -> None:
    deployment = stage.assembly.deployment
    ((task_id, task),) = deployment.resources("AWS::ECS::TaskDefinition").items()
    (container,) = task["Properties"]["ContainerDefinitions"]
    role = task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    manifest = json.loads((stage.app.cdk_out / "Reports.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    context = stage.app.cdk_out / image["source"]["directory"]
    assert image["source"].get("dockerFile", "Dockerfile") == "worker.Dockerfile"
    assert (context / "app" / "report.py").is_file()
    (wheel,) = (context / "pail").glob("pailq-*.whl")
    assert (context / "pail" / "requirements.txt").read_text().split() == [
        f"/tmp/pail/{wheel.name}"
    ]
    # What the Dockerfile does: install the wheel (its dependencies are the venv's), copy app/.
    site = tmp_path / "site"
    subprocess.run(
        [
            str(stage.app.python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    assert (site / "pail" / "cli" / "__init__.py").is_file()
    pail = queue_of(stage, s3_server, "exports")
    job = pail.enqueue({"report_id": "export-1", "rows": [1, 2, 3]})
    environment = {e["Name"]: str(deployment.resolve(e["Value"])) for e in container["Environment"]}
    env = {
        **toolchain.clean_env([stage.app.venv / "bin"]),
        **environment,
        "PYTHONPATH": f"{site}{os.pathsep}{context / 'app'}",
        "AWS_ACCESS_KEY_ID": role,
        "AWS_SECRET_ACCESS_KEY": "rehearsal-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": proxy.endpoint_url,
    }

    assert container["Command"] == ["pail", "work", "--handler", "report:run"]
    (cluster,) = deployment.resources("AWS::ECS::Cluster")
    task_arn = f"arn:aws:ecs:us-east-1:123456789012:task/{deployment.physical_name(cluster)}/0a1b"
    policy = proxy.policies[role]

    def may_protect() -> bool:
        # The agent calls UpdateTaskProtection with the task role's credentials.
        allowed = policy.allows("ecs:UpdateTaskProtection", task_arn)
        action = "ecs:UpdateTaskProtection"
        proxy.record(Request(role, "ecs", action, task_arn, allowed, 200 if allowed else 400))
        return allowed

    # A service's task: it works the job, polls on, and stops cleanly on ECS's SIGTERM.
    with (
        EcsAgentDouble(authorize=may_protect, task_arn=task_arn) as agent,
        subprocess.Popen(
            container["Command"],
            cwd=context / "app",
            env={**env, "ECS_AGENT_URI": agent.uri},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as running,
    ):
        try:
            wait_until(
                lambda: pail.result(job) is not None and agent.states() == [True, False],
                timeout=120,
                what="the task to work the job, then drop its protection once idle",
            )
        finally:
            running.send_signal(signal.SIGTERM)
            out, err = running.communicate(timeout=60)

    assert running.returncode == 0, out[-2000:] + err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["succeeded"], summary["stop_reason"]) == (1, "signal")
    assert proxy.denied() == []
    assert pail.result(job) == {"report_id": "export-1", "rows": 3}
    assert {r.role for r in proxy.snapshot()} == {role}, task_id
    # Protected from its claim to its result; nothing on or left on after SIGTERM.
    (result_written,) = [
        c.at for c in proxy.s3_calls(role) if c.method == "PUT" and c.path.endswith(f"done/{job}")
    ]
    protected, released = agent.calls
    assert protected.enabled and protected.at < result_written < released.at
    assert not released.enabled and not agent.protected()
    usage.extend(proxy.snapshot())


def _wake_of(stage: Stage) -> FunctionSpec:
    (spec,) = [f for f in stage.assembly.functions().values() if ENV_SERVICE in f.environment]
    return spec


def test_given_the_service_at_zero_when_a_job_is_enqueued_then_the_wake_up_starts_one_task(
    stage: Stage, proxy: AwsProxy, usage: list[Request]
) -> None:
    spec = _wake_of(stage)
    deployment = stage.assembly.deployment
    ((service_id, _),) = deployment.resources("AWS::ECS::Service").items()
    assert spec.environment[ENV_CLUSTER] in deployment.physical_name(service_id)
    service = proxy.add_ecs_service(
        spec.environment[ENV_CLUSTER], spec.environment[ENV_SERVICE], desired=0
    )
    assert service.arn == deployment.physical_name(service_id)
    enqueued = object_created(stage.bucket, "exports/queue/01J00000000000000000000000")

    with stage.running(spec, proxy) as wake:
        first = wake.invoke(enqueued)
        second = wake.invoke(enqueued)
        service.desired = 3  # the scaling policy added tasks since
        third = wake.invoke(enqueued)

    assert proxy.denied() == []
    assert (first, second, third) == (
        {"woken": True, "desired": 1},
        {"woken": False, "desired": 1},
        {"woken": False, "desired": 3},
    )
    assert proxy.ecs_updates == [(service.arn, 1)]
    assert {(r.role, r.action) for r in proxy.snapshot()} == {
        (spec.role, "ecs:DescribeServices"),
        (spec.role, "ecs:UpdateService"),
    }
    usage.extend(proxy.snapshot())


# --- the layer as Lambda unpacks it ----------------------------------------------------


def _layer_python(
    stage: Stage, opt: Path, code: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in the functions' Python with nothing but the unpacked layer on its path."""
    return subprocess.run(
        [str(stage.runtime.python), *flags, "-c", code],
        env={
            "PYTHONPATH": str(opt / "python"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_given_the_layer_unzipped_with_1980_timestamps_when_imported_then_its_bytecode_is_used(
    stage: Stage,
) -> None:
    _, opt = stage.deployed(stage.assembly.function(WORKER_HANDLER))
    assert time.gmtime((opt / "python" / "pail" / "queue.py").stat().st_mtime).tm_year in {
        1979,
        1980,
    }

    result = _layer_python(
        stage,
        opt,
        "import pail.aws.lambda_worker, pail.aws.reaper, aws_lambda_powertools, boto3",
        "-v",
    )

    assert result.returncode == 0, result.stderr[-2000:]
    loaded = [line for line in result.stderr.splitlines() if line.startswith("# code object from")]
    from_layer = [line for line in loaded if str(opt) in line]
    compiled_here = [line for line in from_layer if not line.rstrip("'").endswith(".pyc")]
    assert len(from_layer) > 50
    assert compiled_here == [], compiled_here[:5]


def test_given_the_layer_when_every_pail_module_is_imported_with_only_the_layer_then_all_import(
    stage: Stage,
) -> None:
    _, opt = stage.deployed(stage.assembly.function(WORKER_HANDLER))
    code = (
        "import importlib, pkgutil, pail\n"
        "names = [m.name for m in pkgutil.walk_packages(pail.__path__, 'pail.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(len(names))"
    )

    result = _layer_python(stage, opt, code)

    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.strip()) > 20


# --- the rehearsal fails when the deployment would ------------------------------------


def test_given_a_wrong_handler_string_when_the_worker_starts_then_the_rehearsal_fails(
    stage: Stage, proxy: AwsProxy
) -> None:
    spec = stage.assembly.function(WORKER_HANDLER)

    with (
        stage.running(spec, proxy, handler="report.handle") as worker,
        pytest.raises(FunctionFailedError, match=r"Runtime\.HandlerNotFound"),
    ):
        worker.invoke(SCHEDULE, timeout=60)


def test_given_a_layer_missing_a_dependency_when_the_worker_starts_then_the_rehearsal_fails(
    stage: Stage, proxy: AwsProxy
) -> None:
    import shutil

    spec = stage.assembly.function(WORKER_HANDLER)
    task_root, opt = stage.copy_deployed(spec)
    # Powertools, which the worker imports on its first invocation (Lambda's runtime has none).
    shutil.rmtree(opt / "python" / "aws_lambda_powertools")

    with (
        stage.running(spec, proxy, roots=(task_root, opt)) as worker,
        pytest.raises(FunctionFailedError, match=r"No module named 'aws_lambda_powertools'"),
    ):
        worker.invoke(SCHEDULE, timeout=60)


def test_given_a_worker_role_without_delete_when_it_drains_then_denied_requests_fail_the_rehearsal(
    stage: Stage, s3_server: LocalS3, proxy: AwsProxy
) -> None:
    spec = stage.assembly.function(WORKER_HANDLER)
    proxy.policies[spec.role] = proxy.policies[spec.role].without("s3:DeleteObject")
    pail = queue_of(stage, s3_server)
    job = pail.enqueue({"report_id": "denied"})

    with stage.running(spec, proxy) as worker, pytest.raises(FunctionFailedError):
        worker.invoke(object_created(stage.bucket, pail.keys.queue(job)), timeout=120)

    denied = {(r.role, r.action) for r in proxy.denied()}
    assert denied == {(spec.role, "s3:DeleteObject")}
    status = pail.status(job)  # not done, and not lost: a worker with its rights finishes it
    assert pail.result(job) is None
    assert status is not None and status.state in {JobState.PENDING, JobState.RUNNING}


# --- the figures: cold start and least privilege --------------------------------------


def test_given_bytecode_or_none_when_cold_starting_the_worker_then_both_figures_are_reported(
    stage: Stage, proxy: AwsProxy
) -> None:
    import shutil

    spec = stage.assembly.function(WORKER_HANDLER)
    without = stage.copy_deployed(spec)
    for cache in list(without[1].rglob("__pycache__")):
        shutil.rmtree(cache)
    figures: dict[str, dict[str, float]] = {}
    for variant, roots in (("with_bytecode", stage.deployed(spec)), ("without_bytecode", without)):
        runs = []
        for _ in range(3):
            proxy.clear()
            with stage.running(spec, proxy, roots=roots) as worker:
                summary = worker.invoke(SCHEDULE)
                (invocation,) = worker.api.by_id.values()
                cpu = worker.cpu_seconds()
                assert summary["trigger"] == "schedule"
                assert worker.init_seconds is not None and cpu is not None
                # The S3 round trips (one LIST of an empty queue) are counted apart.
                s3 = sum(call.seconds for call in proxy.s3_calls(spec.role))
                runs.append((worker.init_seconds, invocation.duration, cpu, s3))
        figures[variant] = {
            "init_ms": round(statistics.median(r[0] for r in runs) * 1000),
            "first_invocation_ms": round(statistics.median(r[1] for r in runs) * 1000),
            "first_invocation_s3_ms": round(statistics.median(r[3] for r in runs) * 1000),
            "init_plus_first_call_overhead_ms": round(
                statistics.median(r[0] + r[1] - r[3] for r in runs) * 1000
            ),
            "total_ms": round(statistics.median(r[0] + r[1] for r in runs) * 1000),
            "cpu_ms": round(statistics.median(r[2] for r in runs) * 1000),
            "load_average": round(os.getloadavg()[0], 1),
        }
    print(f"\ncold start of the worker (median of 3): {figures}")
    stage.write_report("worker_cold_start_ms", figures)
    assert proxy.denied() == []


def test_given_the_scenarios_requests_when_tabulated_then_each_role_is_granted_what_it_uses(
    stage: Stage, usage: list[Request]
) -> None:
    from .rehearsal import privilege

    policies = stage.policies()
    worker = stage.assembly.function(WORKER_HANDLER).role
    reaper = _reaper_of(stage, queue="").role
    (task,) = [
        r for r in policies if r not in {s.role for s in stage.assembly.functions().values()}
    ]
    labels = {
        worker: "Lambda worker",
        task: "Fargate task",
        reaper: "reaper",
        _wake_of(stage).role: "Fargate wake-up",
    }
    if {r.role for r in usage} != set(labels):
        pytest.skip("the least-privilege table needs every scenario of this module to have run")

    table = privilege.render(labels, policies, usage)
    print("\n" + table)
    stage.write_report("least_privilege", {"table": table})
    for role in labels:
        used = privilege.used(usage)[role]
        granted = privilege.granted(policies[role])
        assert all(states <= granted.get(action, set()) for action, states in used.items())
    document = toolchain.DEPLOY.read_text()
    documented = document.split(privilege.START, 1)[1].split(privilege.END, 1)[0].strip()
    assert documented == table, (
        f"docs/deploy.md's least-privilege table is stale; it is now:\n{table}"
    )


@pytest.mark.parametrize("command", [["demo", "--no-hold"], ["server", "--port", "0"]])
def test_given_no_local_extra_when_the_local_server_is_needed_then_pail_says_what_to_install(
    stage: Stage, command: list[str]
) -> None:
    result = subprocess.run(
        [str(stage.app.venv / "bin" / "pail"), *command],
        env=toolchain.clean_env([stage.app.venv / "bin"]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2, result.stdout + result.stderr
    assert "pip install 'pailq[local]'" in result.stderr
    assert "Traceback" not in result.stderr
