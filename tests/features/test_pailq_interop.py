"""pailq-layout compatibility: the real pailq 0.1.1 and pail share one bucket, both ways.

The original is installed from the package index into its own venv (the
benchmark's ``.bench-venv``, built and verified by ``bench/pail_bench/original.py``)
and driven as a subprocess against the same local server: its import name is
``pail`` too, so it can never share this process.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pail import JobState, Pail
from pail.local import LocalS3

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.s3, pytest.mark.slow]

_DRIVER = """
import json, sys
from pail import Pail
args = json.loads(sys.argv[1])
pail = Pail.connect(args["bucket"], **args["connect"])
if args["action"] == "enqueue":
    print(json.dumps([pail.enqueue(p) for p in args["payloads"]]))
elif args["action"] == "work":
    handled = []
    while pail.work_once(lambda payload: handled.append(payload) or {"doubled": payload["n"] * 2}):
        pass
    print(json.dumps(handled))
elif args["action"] == "results":
    print(json.dumps([pail.result(i) for i in args["ids"]]))
"""


def _load_installer() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "pail_bench_original", ROOT / "bench" / "pail_bench" / "original.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def original_python() -> Path:
    """The interpreter of a venv holding the released, unmodified pailq 0.1.1."""
    installer = _load_installer()
    original = installer.ensure(ROOT / ".bench-venv")
    assert original.version == "0.1.1"
    python: Path = original.python
    return python


def _original(python: Path, server: LocalS3, bucket: str, **args: Any) -> Any:
    kwargs = server.connect_kwargs()
    args = {"bucket": bucket, "connect": kwargs, **args}
    done = subprocess.run(
        [str(python), "-c", _DRIVER, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",  # never import this project's pail by accident
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_given_jobs_enqueued_by_pailq_when_pail_works_then_pailq_reads_the_results(
    original_python: Path, s3_server: LocalS3, bucket: str, pail: Pail
) -> None:
    payloads = [{"n": n} for n in range(3)]
    ids = _original(original_python, s3_server, bucket, action="enqueue", payloads=payloads)

    seen: list[Any] = []

    def double(payload: Any) -> Any:
        seen.append(payload)
        return {"doubled": payload["n"] * 2}

    while pail.work_once(double):
        pass

    assert seen == payloads  # FIFO, as the original enqueued them
    statuses = [pail.status(job_id) for job_id in ids]
    assert all(s is not None and s.state is JobState.DONE for s in statuses)
    results = _original(original_python, s3_server, bucket, action="results", ids=ids)
    assert results == [{"doubled": 0}, {"doubled": 2}, {"doubled": 4}]


def test_given_jobs_enqueued_by_pail_when_pailq_works_then_pail_reads_the_results(
    original_python: Path, s3_server: LocalS3, bucket: str, pail: Pail
) -> None:
    payloads = [{"n": n} for n in range(3)]
    ids = [pail.enqueue(payload) for payload in payloads]

    handled = _original(original_python, s3_server, bucket, action="work")

    assert handled == payloads
    assert [pail.result(job_id) for job_id in ids] == [{"doubled": 2 * n} for n in range(3)]
    status = pail.status(ids[0])
    assert status is not None and status.state is JobState.DONE
    assert pail.stats().pending == 0 and pail.stats().running == 0


def test_given_tagged_jobs_enqueued_by_pail_when_pailq_works_then_its_reader_runs_them(
    original_python: Path, s3_server: LocalS3, bucket: str, pail: Pail
) -> None:
    # The tags are one more envelope field (and objects under _pail/index/, which
    # pailq never lists): the original's reader takes payload and attempts only.
    payloads = [{"n": n} for n in range(3)]
    ids = [pail.enqueue(p, tags={"customer": "acme", "n": str(p["n"])}) for p in payloads]

    handled = _original(original_python, s3_server, bucket, action="work")

    assert handled == payloads
    assert [pail.result(job_id) for job_id in ids] == [{"doubled": 2 * n} for n in range(3)]
    found = pail.search(tags={"customer": "acme", "n": "1"})
    # pailq's done/ carries no tags: the index vouches for them (a HEAD for the second).
    assert [job.id for job in found.jobs] == ids[1:2]
    assert found.jobs[0].state is JobState.DONE
    assert found.jobs[0].tags == {"customer": "acme", "n": "1"}


def test_given_pailq_enqueues_a_nan_payload_when_pail_works_then_it_is_dead_lettered_and_the_next_job_runs(
    original_python: Path, s3_server: LocalS3, bucket: str, pail: Pail
) -> None:
    # pailq 0.1.1 writes NaN as a bare word (Python's json default): valid input,
    # but pail writes strict JSON only, so it cannot lease the job (docs/protocol.md,
    # "Foreign bytes"). It must neither run nor block the job behind it.
    nan_id, good_id = _original(
        original_python,
        s3_server,
        bucket,
        action="enqueue",
        payloads=[{"n": float("nan")}, {"n": 2}],
    )
    status = pail.status(nan_id)
    assert status is not None and status.state is JobState.PENDING
    assert status.error is not None and "NaN" in status.error.message  # says why it will not run

    seen: list[Any] = []

    def double(payload: Any) -> Any:
        seen.append(payload)
        return {"doubled": payload["n"] * 2}

    while pail.work_once(double):
        pass

    assert seen == [{"n": 2}]
    assert pail.result(good_id) == {"doubled": 4}
    [letter] = pail.dead_letters()
    assert letter.job_id == nan_id and letter.raw is not None and "NaN" in letter.raw
    assert letter.error is not None and letter.error.type == "PayloadError"
