"""The functions of a cloud assembly, deployed onto this machine as Lambda would run them.

Assets are zipped as the CDK CLI zips them at ``cdk deploy`` (its
``writeZipFile``: every file, dot-files included, no folder entries, the
file's mode kept, and every timestamp 1980-01-01 00:00:00), and unzipped as
Lambda unpacks a function (the task root) and its layers (``/opt``), with the
zip's timestamps. Inline code (``ZipFile``) becomes ``index.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cfn import Deployment

CDK_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def cdk_zip(directory: Path, archive: Path) -> Path:
    """Zip ``directory`` the way the CDK CLI zips a file asset."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(directory.rglob("*")):
            if path.is_dir():
                continue
            member = zipfile.ZipInfo(path.relative_to(directory).as_posix(), date_time=CDK_ZIP_DATE)
            member.external_attr = (path.stat().st_mode & 0xFFFF) << 16
            member.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(member, path.read_bytes())
    return archive


def lambda_unzip(archive: Path, destination: Path) -> None:
    """Unpack ``archive`` as Lambda does: files, their modes, and the zip's timestamps."""
    with zipfile.ZipFile(archive) as source:
        for member in source.infolist():
            target = destination / member.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            with source.open(member) as data, target.open("wb") as out:
                shutil.copyfileobj(data, out)
            mode = (member.external_attr >> 16) & 0o777
            if mode:
                target.chmod(mode)
            stamp = time.mktime((*member.date_time, 0, 0, -1))
            os.utime(target, (stamp, stamp))


@dataclass(frozen=True)
class FunctionSpec:
    """One ``AWS::Lambda::Function`` of the template, its references resolved."""

    logical_id: str
    name: str
    arn: str
    handler: str
    runtime: str
    timeout: float
    memory: int
    role: str
    environment: dict[str, str]
    code: Path | str
    layers: tuple[Path, ...]

    @property
    def python_version(self) -> str:
        return self.runtime.removeprefix("python")


@dataclass
class CloudAssembly:
    """A synthesised stack: its template, its assets, and the functions in it."""

    outdir: Path
    stack: str
    deployment: Deployment

    @classmethod
    def read(cls, outdir: Path, stack: str, bucket_names: dict[str, str]) -> CloudAssembly:
        template = json.loads((outdir / f"{stack}.template.json").read_text())
        return cls(outdir, stack, Deployment(template, stack, bucket_names))

    @property
    def template(self) -> dict[str, Any]:
        return self.deployment.template

    def _asset(self, key: str) -> Path:
        manifest = json.loads((self.outdir / f"{self.stack}.assets.json").read_text())
        for asset_hash, entry in manifest["files"].items():
            if key in {f"{asset_hash}.zip", asset_hash} or any(
                destination.get("objectKey") == key
                for destination in entry["destinations"].values()
            ):
                return self.outdir / str(entry["source"]["path"])
        raise KeyError(f"no asset for S3 key {key}")

    def functions(self) -> dict[str, FunctionSpec]:
        found = {}
        resolve = self.deployment.resolve
        for logical_id, resource in self.deployment.resources("AWS::Lambda::Function").items():
            props = resource["Properties"]
            code = props["Code"]
            layers = []
            for layer in props.get("Layers", []):
                (layer_id,) = [layer["Ref"]] if "Ref" in layer else [None]
                assert layer_id is not None, f"{logical_id}: layer {layer} is not in this stack"
                content = self.template["Resources"][layer_id]["Properties"]["Content"]
                layers.append(self._asset(str(resolve(content["S3Key"]))))
            found[logical_id] = FunctionSpec(
                logical_id=logical_id,
                name=self.deployment.physical_name(logical_id),
                arn=self.deployment.arn(logical_id, "Arn"),
                handler=props["Handler"],
                runtime=props["Runtime"],
                timeout=float(props.get("Timeout", 3)),
                memory=int(props.get("MemorySize", 128)),
                role=props["Role"]["Fn::GetAtt"][0],
                environment={
                    k: str(resolve(v))
                    for k, v in props.get("Environment", {}).get("Variables", {}).items()
                },
                code=code["ZipFile"]
                if "ZipFile" in code
                else self._asset(str(resolve(code["S3Key"]))),
                layers=tuple(layers),
            )
        return found

    def function(self, handler: str) -> FunctionSpec:
        """The one function whose handler is ``handler``."""
        (spec,) = [f for f in self.functions().values() if f.handler == handler]
        return spec


def deploy(spec: FunctionSpec, root: Path) -> tuple[Path, Path]:
    """Zip and unpack ``spec``'s code and layers under ``root``: ``(task root, opt)``."""
    task_root, opt, zips = root / "task", root / "opt", root / "zips"
    for folder in (task_root, opt, zips):
        folder.mkdir(parents=True, exist_ok=True)
    if isinstance(spec.code, str):
        (task_root / "index.py").write_text(spec.code)
        os.utime(task_root / "index.py", (time.mktime((*CDK_ZIP_DATE, 0, 0, -1)),) * 2)
    else:
        lambda_unzip(cdk_zip(spec.code, zips / "code.zip"), task_root)
    for number, layer in enumerate(spec.layers):
        lambda_unzip(cdk_zip(layer, zips / f"layer-{number}.zip"), opt)
    return task_root, opt
