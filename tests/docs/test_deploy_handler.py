"""docs/deploy.md's "try the handler first" command works, as written, from the app's folder.

The app keeps its handler in ``handlers/report.py``; the Fargate tasks
import it as ``report:run`` from an image that puts that folder on the
import path. The command the page gives for a run on your own machine is
run here in a folder holding the page's files, against the local server.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from pail import Pail
from pail.local import LocalS3
from tests.infra.rehearsal import toolchain
from tests.support.command import pail_script, process_env

COMMAND = re.compile(r"`(PYTHONPATH=handlers pail work-once jobs --handler report:run)`")


def documented_command() -> str:
    text = " ".join(toolchain.DEPLOY.read_text().split())  # the command may wrap
    found = COMMAND.search(text)
    assert found, "docs/deploy.md no longer gives the command to run the handler locally"
    return found.group(1)


def test_given_the_deploy_app_folder_when_its_local_command_runs_then_the_handler_works_a_job(
    s3_server: LocalS3, pail: Pail, bucket: str, tmp_path: Path
) -> None:
    toolchain.write_user_app(tmp_path)
    job_id = pail.enqueue({"report_id": "q3", "rows": [1, 2, 3]})
    env = process_env(s3_server.env())
    env["PATH"] = f"{Path(pail_script()).parent}{os.pathsep}{env['PATH']}"
    env.pop("PYTHONPATH", None)
    # The page's queue is `jobs`; this test's bucket stands in for it.
    command = documented_command().replace(" jobs ", f" {bucket} ")

    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert pail.result(job_id) == {"report_id": "q3", "rows": 3}


def test_given_the_app_folder_when_the_image_spelling_runs_without_the_path_then_it_says_why(
    s3_server: LocalS3, bucket: str, tmp_path: Path
) -> None:
    toolchain.write_user_app(tmp_path)
    env = process_env(s3_server.env())
    env.pop("PYTHONPATH", None)

    done = subprocess.run(
        [pail_script(), "work-once", bucket, "--handler", "report:run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 2
    assert "handlers/report.py is here" in done.stderr and "PYTHONPATH=handlers" in done.stderr
