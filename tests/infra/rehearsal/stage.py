"""The rehearsal's stage: the synthesised user app, its bucket, its roles, and its functions running.

``Stage.build`` does the slow part once (wheel, environments, synth); then
``Stage.running(spec, proxy)`` starts a function instance from the cloud
assembly, deployed (zipped and unzipped) once per function and reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pail_cdk.bytecode import find_python

from . import toolchain
from .assembly import CloudAssembly, FunctionSpec, deploy
from .cfn import REGION
from .iam import Policy
from .proxy import AwsProxy
from .runtime_api import FunctionInstance

STACK = "Reports"
WORKER_HANDLER = "report.handler"
REAPER_HANDLER = "index.handler"
SECRET = "rehearsal-secret"


class NoLambdaPythonError(RuntimeError):
    """No interpreter of the functions' Python version on this machine."""


@dataclass
class Stage:
    """Everything built once per session."""

    workdir: Path
    wheel: Path
    app: toolchain.UserApp
    runtime: toolchain.LambdaRuntime
    assembly: CloudAssembly
    bucket: str
    timings: dict[str, float] = field(default_factory=dict)
    _deployed: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    _counter: int = 0

    @classmethod
    def build(cls, workdir: Path, *, bucket: str) -> Stage:
        """Build the wheel, the user's environment and app, synthesise it, and make the runtime."""
        log = workdir / "build.log"
        timings: dict[str, float] = {}
        shim = toolchain.shims(workdir / "bin")
        env = toolchain.clean_env([shim])

        started = time.monotonic()
        wheel = toolchain.build_wheel(workdir / "src", env, log)
        timings["wheel"] = time.monotonic() - started

        started = time.monotonic()
        app = toolchain.run_user_app(workdir / "reports", wheel, env, log)
        timings["install_and_synth"] = time.monotonic() - started

        assembly = CloudAssembly.read(app.cdk_out, STACK, {})
        (bucket_id,) = assembly.deployment.resources("AWS::S3::Bucket")
        assembly.deployment.bucket_names[bucket_id] = bucket
        version = assembly.function(WORKER_HANDLER).python_version
        python = find_python(version)
        if python is None:
            raise NoLambdaPythonError(f"no Python {version} here to run the functions with")
        started = time.monotonic()
        runtime = toolchain.lambda_runtime(workdir / "lambda", python, version, log)
        timings["runtime"] = time.monotonic() - started
        return cls(workdir, wheel, app, runtime, assembly, bucket, timings)

    def policies(self) -> dict[str, Policy]:
        """The policy of every role that runs pail (the functions' and the Fargate tasks'),
        by the role's logical id, which is also the access key its code signs with."""
        deployment = self.assembly.deployment
        roles = {spec.role for spec in self.assembly.functions().values()}
        for task in deployment.resources("AWS::ECS::TaskDefinition").values():
            roles.add(task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0])
        return {role: Policy.of_role(deployment, role) for role in sorted(roles)}

    def deployed(self, spec: FunctionSpec) -> tuple[Path, Path]:
        """``(task root, opt)`` of ``spec``, zipped and unzipped once and then reused."""
        if spec.logical_id not in self._deployed:
            self._deployed[spec.logical_id] = deploy(
                spec, self.workdir / "functions" / spec.logical_id
            )
        return self._deployed[spec.logical_id]

    def copy_deployed(self, spec: FunctionSpec) -> tuple[Path, Path]:
        """A private copy of ``spec``'s deployment, for a test that breaks it."""
        task_root, opt = self.deployed(spec)
        self._counter += 1
        root = self.workdir / "broken" / f"{spec.logical_id}-{self._counter}"
        shutil.copytree(task_root, root / "task", copy_function=shutil.copy2)
        shutil.copytree(opt, root / "opt", copy_function=shutil.copy2)
        return root / "task", root / "opt"

    def function_env(self, spec: FunctionSpec, proxy: AwsProxy) -> dict[str, str]:
        """The template's environment, plus credentials naming the role and the SDK endpoints."""
        return {
            **spec.environment,
            "AWS_ACCESS_KEY_ID": spec.role,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_SESSION_TOKEN": "rehearsal-session",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL_S3": proxy.endpoint_url,
            "AWS_ENDPOINT_URL_LAMBDA": proxy.endpoint_url,
            "AWS_ENDPOINT_URL_ECS": proxy.endpoint_url,
        }

    @contextlib.contextmanager
    def running(
        self,
        spec: FunctionSpec,
        proxy: AwsProxy,
        *,
        environment: Mapping[str, str] | None = None,
        handler: str | None = None,
        roots: tuple[Path, Path] | None = None,
    ) -> Iterator[FunctionInstance]:
        """A started instance of ``spec`` (``environment`` adds to the template's)."""
        task_root, opt = roots or self.deployed(spec)
        self._counter += 1
        instance = FunctionInstance(
            name=spec.name,
            arn=spec.arn,
            handler=handler or spec.handler,
            task_root=task_root,
            opt=opt,
            runtime_python=self.runtime.python,
            runtime_dir=self.runtime.ric,
            environment={**self.function_env(spec, proxy), **(environment or {})},
            timeout=spec.timeout,
            memory=spec.memory,
            python_version=spec.python_version,
            log=self.workdir / "logs" / f"{spec.logical_id}-{self._counter}.log",
        )
        instance.log.parent.mkdir(parents=True, exist_ok=True)
        with instance:
            yield instance

    def write_report(self, name: str, data: Mapping[str, object]) -> None:
        """Add ``data`` under ``name`` to ``$PAIL_REHEARSAL_REPORT`` (a JSON file), if set."""
        target = os.environ.get("PAIL_REHEARSAL_REPORT")
        if not target:
            return
        path = Path(target)
        report = json.loads(path.read_text()) if path.exists() else {}
        report[name] = data
        path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
