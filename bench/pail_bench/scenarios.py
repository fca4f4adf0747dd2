"""The orchestrator: one local S3 server, both queues on it, scenario by scenario.

Runs in the project's venv. Every measurement happens in a driver process
(``pail_bench.driver``): ours under this interpreter, the original under
``.bench-venv``'s. The two alternate, scenario by scenario, each in buckets
of its own on the same server, so a change in the machine's load between
scenarios hits both about equally.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import boto3

from pail_bench.fronted import git_state, partition_section, per_job_section, shard_layouts
from pail_bench.original import Original
from pail_bench.plans import Plan

BENCH_DIR = Path(__file__).resolve().parent.parent
ROOT = BENCH_DIR.parent
SIDES = ("pail", "original")
DRIVER_TIMEOUT = 600.0


class BenchError(RuntimeError):
    """A driver process failed; the message carries the end of its stderr."""


class Server(Protocol):
    """What the benchmark needs of an S3 server launcher (``LocalS3``, ``SeaweedS3``)."""

    @property
    def endpoint_url(self) -> str: ...

    def connect_kwargs(self) -> dict[str, str]: ...


def _driver_env() -> dict[str, str]:
    """The environment a driver runs in: no venv leaking across, no AWS settings but ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "PAIL_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return env


class Runner:
    """Starts drivers against one server and makes buckets for them."""

    def __init__(self, server: Server, original: Original, log: Callable[[str], None]) -> None:
        self._server = server
        self._connect = server.connect_kwargs()
        self._pythons = {"pail": Path(sys.executable), "original": original.python}
        self._log = log
        self._names = itertools.count()
        kw = self._connect
        self._client = boto3.client(
            "s3",
            endpoint_url=kw["endpoint_url"],
            aws_access_key_id=kw["access_key_id"],
            aws_secret_access_key=kw["secret_access_key"],
            region_name=kw["region"],
        )

    def bucket(self, label: str, *, extra: int = 0) -> str:
        """A new bucket (plus ``{name}-0 .. -{extra-1}`` beside it); returns its name."""
        name = f"bench-{label}-{next(self._names)}"
        for bucket in [name, *(f"{name}-{i}" for i in range(extra))]:
            self._client.create_bucket(Bucket=bucket)
        return name

    def drive(
        self, side: str, scenario: str, params: dict[str, Any], *, extra_buckets: int = 0
    ) -> dict[str, Any]:
        """Run one scenario for one side in a fresh driver process; its JSON result."""
        bucket = self.bucket(f"{scenario.replace('_', '-')}-{side}", extra=extra_buckets)
        spec = {"scenario": scenario, "bucket": bucket, "params": params, "connect": self._connect}
        started = time.perf_counter()
        done = subprocess.run(
            [str(self._pythons[side]), "-m", "pail_bench.driver"],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            cwd=BENCH_DIR,
            env=_driver_env(),
            timeout=DRIVER_TIMEOUT,
            check=False,
        )
        if done.returncode != 0 or not done.stdout.strip():
            tail = done.stderr.strip()[-3000:]
            raise BenchError(f"{scenario} ({side}) exited {done.returncode}:\n{tail}")
        result: dict[str, Any] = json.loads(done.stdout)
        if result.get("side") != side:
            raise BenchError(f"{scenario}: expected the {side} queue, the driver imported {result}")
        result["stderr_lines"] = len(done.stderr.splitlines())
        self._log(f"    {scenario:<12} {side:<8} {time.perf_counter() - started:6.1f} s")
        return result

    def both(
        self, scenario: str, params: Callable[[str], dict[str, Any]], **kw: Any
    ) -> dict[str, Any]:
        """The scenario for ours, then for the original."""
        return {side: self.drive(side, scenario, params(side), **kw) for side in SIDES}


def server_figures(runner: Runner, plan: Plan) -> dict[str, Any]:
    """The server's own ceiling and its LIST time against bucket size."""
    return {
        "ceiling": runner.drive(
            "pail",
            "ceiling",
            {"threads": plan.ceiling_threads, "seconds": plan.ceiling_seconds},
        ),
        "list_scaling": runner.drive(
            "pail",
            "list_scaling",
            {
                "sizes": plan.list_sizes,
                "max_keys": plan.list_max_keys,
                "repeats": plan.list_repeats,
            },
        ),
    }


SECTIONS = (
    "server",
    "claim_path",
    "contention",
    "idle",
    "latency",
    "per_job",
    "partitions",
    "shards",
    "second_server",
)
"""Every section of a run, in the order it runs; ``--only`` picks some."""


def run_plan(
    plan: Plan,
    original: Original,
    log: Callable[[str], None],
    server_factory: Callable[[], AbstractContextManager[Any]],
    second_server: SecondServer | None = None,
    only: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Run every section of ``plan`` (or those in ``only``); the raw results, ready for ``report``."""
    started = time.perf_counter()

    def want(section: str) -> bool:
        return only is None or section in only

    results: dict[str, Any] = {
        "meta": {
            "plan": plan.to_json(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "git": git_state(),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
            "original": {
                "version": original.version,
                "python": original.python_version,
                "module": original.module,
                "files_verified": original.files_verified,
            },
            "sections": [s for s in SECTIONS if want(s)],
        }
    }
    with server_factory() as server:
        results["meta"]["server"] = "moto 5.2.5 via pail.local (writes serialised)"
        runner = Runner(server, original, log)
        if want("server"):
            log("==> server figures")
            results["server"] = server_figures(runner, plan)
        if want("claim_path"):
            log("==> claim cost against backlog")
            results["claim_path"] = runner.both(
                "claim_path",
                lambda side: {
                    "backlogs": plan.backlogs,
                    "claims": plan.pail_claims if side == "pail" else plan.original_claims,
                    "cap_seconds": plan.claim_cap_seconds,
                    # pail's claims run to the end (a loaded machine would otherwise cut them
                    # short and one page's LIST would count over too few claims); the
                    # original's stop at the cap, after at least 3.
                    "min_claims": max(plan.pail_claims) if side == "pail" else 3,
                },
                extra_buckets=len(plan.backlogs),
            )
        if want("contention"):
            log("==> contention")
            results["contention"] = {side: [] for side in SIDES}
            for workers in plan.contention_workers:
                for side in SIDES:
                    results["contention"][side].append(
                        runner.drive(side, "contention", _contention_params(plan, side, workers))
                    )
        if want("idle"):
            log("==> idle cost (both sides at once)")
            with ThreadPoolExecutor(2) as pool:
                idle = {
                    side: pool.submit(
                        runner.drive,
                        side,
                        "idle",
                        {"seconds": plan.idle_seconds, "settings": plan.idle_settings(side)},
                        extra_buckets=2,
                    )
                    for side in SIDES
                }
                results["idle"] = {side: future.result() for side, future in idle.items()}
        if want("latency"):
            log("==> latency")
            results["latency"] = runner.both(
                "latency", lambda side: {"samples": plan.latency_samples, **plan.latency_polling}
            )
        if want("per_job"):
            log("==> per-job time of one worker, through fronts that delay each request")
            results["per_job"] = per_job_section(runner, plan.per_job, server.endpoint_url, log)
        if want("partitions"):
            log("==> jobs/s through the partition model")
            results["partitions"] = partition_section(
                runner, plan.partitions, server.endpoint_url, log
            )
        if want("shards") and plan.partitions.shard_counts:
            log("==> jobs/s against shards, each shard its own partition")
            results["shards"] = partition_section(
                runner,
                plan.partitions,
                server.endpoint_url,
                log,
                layouts=shard_layouts(plan.partitions),
            )
    if want("second_server"):
        results["second_server"] = _second_server(plan, original, log, second_server)
    results["meta"]["wall_seconds"] = round(time.perf_counter() - started, 1)
    return results


def _contention_params(plan: Plan, side: str, workers: int) -> dict[str, Any]:
    cap = plan.pail_contention_cap if side == "pail" else plan.original_contention_cap
    return {"workers": workers, "jobs": plan.contention_jobs, "cap_seconds": cap}


SecondServer = Callable[[], tuple[str, AbstractContextManager[Any]] | None]
"""Returns the second server's name and launcher, or None if it is not installed."""


def _second_server(
    plan: Plan,
    original: Original,
    log: Callable[[str], None],
    factory: SecondServer | None,
) -> dict[str, Any]:
    if not plan.second_server:
        return {"skipped": "not in this plan"}
    found = factory() if factory else None
    if found is None:
        return {"skipped": "no second server available (SeaweedFS's weed binary not found)"}
    name, manager = found
    log(f"==> second server: {name}")
    with manager as server:
        runner = Runner(server, original, log)
        figures = server_figures(runner, plan)
        figures["name"] = name
        figures["contention"] = {
            side: runner.drive(
                side, "contention", _contention_params(plan, side, plan.throughput_workers)
            )
            for side in SIDES
        }
        return figures
