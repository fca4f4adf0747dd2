"""Cold start of the worker Lambda with two versions of the layer's pail, runs interleaved.

``python -m tests.infra.rehearsal.cold_start_compare main after`` builds the
rehearsal's stage (or reuses it: ``SL_REUSE=1``, under ``SL_WORK``, default
``/tmp/sl-cold``), makes a variant of the worker's layer per name other than
``after`` whose ``pail`` package is the folder ``$SL_<NAME>`` (for example
``SL_MAIN`` pointing at ``runtime/pail`` of a ``git archive main``), compiled
as the layer's bytecode is, and runs each ``SL_RUNS`` times (default 3), the
variants in turn: init, first invocation, its S3 time (timed at the proxy,
counted apart) and the process's CPU. ``after`` is the stage's own layer.
The figures in ``docs/deploy.md``'s "Cold start" come from it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import boto3

from pail.local import LocalS3
from tests.infra.rehearsal.proxy import AwsProxy
from tests.infra.rehearsal.stage import WORKER_HANDLER, Stage

WORK = Path(os.environ.get("SL_WORK", "/tmp/sl-cold"))
SCHEDULE = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
RUNS = int(os.environ.get("SL_RUNS", "3"))


def stage() -> Stage:
    from tests.infra.rehearsal import toolchain
    from tests.infra.rehearsal.assembly import CloudAssembly
    from tests.infra.rehearsal.stage import STACK

    root = WORK / "stage"
    if (root / "lambda").exists() and os.environ.get("SL_REUSE"):
        app = toolchain.UserApp(
            root / "reports", root / "reports" / ".venv", root / "reports" / "cdk.out"
        )
        assembly = CloudAssembly.read(app.cdk_out, STACK, {})
        (bucket_id,) = assembly.deployment.resources("AWS::S3::Bucket")
        assembly.deployment.bucket_names[bucket_id] = "reports-cold"
        runtime = toolchain.LambdaRuntime(
            root / "lambda/python/bin/python", root / "lambda/runtime", "3.12"
        )
        (wheel,) = (root / "src/pail/dist").glob("*.whl")
        built = Stage(root, wheel, app, runtime, assembly, "reports-cold")
        spec = assembly.function(WORKER_HANDLER)
        built._deployed[spec.logical_id] = (
            root / "functions" / spec.logical_id / "task",
            root / "functions" / spec.logical_id / "opt",
        )
        return built
    WORK.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    return Stage.build(root, bucket="reports-cold")


def variant(built: Stage, name: str, pail_source: Path | None) -> tuple[Path, Path]:
    spec = built.assembly.function(WORKER_HANDLER)
    task, opt = built.deployed(spec)
    if pail_source is None:
        return task, opt
    root = WORK / "variants" / name
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(task, root / "task")
    shutil.copytree(opt, root / "opt")
    site = root / "opt" / "python"
    shutil.rmtree(site / "pail")
    shutil.copytree(pail_source, site / "pail", ignore=shutil.ignore_patterns("__pycache__", "cli"))
    subprocess.run(
        [
            str(built.runtime.python),
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode",
            "unchecked-hash",
            "-d",
            "/opt/python/pail",
            str(site / "pail"),
        ],
        check=True,
    )
    return root / "task", root / "opt"


def measure(built: Stage, proxy: AwsProxy, roots: tuple[Path, Path]) -> dict[str, float]:
    spec = built.assembly.function(WORKER_HANDLER)
    proxy.clear()
    with built.running(spec, proxy, roots=roots) as worker:
        summary = worker.invoke(SCHEDULE)
        (invocation,) = worker.api.by_id.values()
        cpu = worker.cpu_seconds()
    assert summary["trigger"] == "schedule", summary
    s3 = sum(c.seconds for c in proxy.s3_calls(spec.role))
    assert worker.init_seconds is not None and cpu is not None
    return {
        "init_ms": worker.init_seconds * 1000,
        "first_call_ms": invocation.duration * 1000,
        "s3_ms": s3 * 1000,
        "requests": len(proxy.s3_calls(spec.role)),
        "overhead_ms": (invocation.duration - s3) * 1000,
        "cpu_ms": cpu * 1000,
    }


def main() -> None:
    names = sys.argv[1:] or ["after"]
    built = stage()
    variants = {}
    for name in names:
        source = None if name == "after" else Path(os.environ[f"SL_{name.upper()}"])
        variants[name] = variant(built, name, source)
    results: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    with LocalS3() as server:
        kwargs = server.connect_kwargs()
        boto3.client(
            "s3",
            endpoint_url=kwargs["endpoint_url"],
            aws_access_key_id=kwargs["access_key_id"],
            aws_secret_access_key=kwargs["secret_access_key"],
            region_name=kwargs["region"],
        ).create_bucket(Bucket=built.bucket)
        with AwsProxy(server.endpoint_url, built.policies()) as proxy:
            for _ in range(RUNS):
                for name in names:
                    results[name].append(measure(built, proxy, variants[name]))
                    print(
                        name,
                        {k: round(v) for k, v in results[name][-1].items()},
                        "load",
                        os.getloadavg()[0],
                        flush=True,
                    )
    summary = {
        name: {key: round(statistics.median(r[key] for r in runs)) for key in runs[0]}
        for name, runs in results.items()
    }
    print(json.dumps({"runs": results, "median": summary}, indent=1))


if __name__ == "__main__":
    main()
