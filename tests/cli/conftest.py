"""Fixtures for the CLI tests: the ``pail`` command, in-process, against the local S3 server."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from click.testing import CliRunner, Result

from pail import Pail
from pail.cli import cli
from pail.config import ALL_ENV_VARS
from pail.local import LocalS3

Invoke = Callable[..., Result]


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

    def _invoke(
        *args: str, input: str | None = None, env: Mapping[str, str] | None = None
    ) -> Result:
        runner = CliRunner()
        return runner.invoke(
            cli,
            list(args),
            input=input,
            env={**server_env, **(env or {})},
            catch_exceptions=False,
        )

    return _invoke


@pytest.fixture
def connect(s3_server: LocalS3, bucket: str) -> Callable[..., Pail]:
    """Connect a ``Pail`` (with ``Pail.connect`` options) to the test's bucket."""

    def _connect(**options: object) -> Pail:
        return Pail.connect(bucket, **{**s3_server.connect_kwargs(), **options})  # type: ignore[arg-type]

    return _connect


@pytest.fixture
def pail(connect: Callable[..., Pail]) -> Pail:
    """A ``Pail`` on the test's bucket, to set up and inspect what the CLI did."""
    return connect()
