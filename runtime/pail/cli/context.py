"""Global options, the ``[BUCKET]`` argument, and connecting a command to its queue.

Global options (``--endpoint-url``, ``--json``, ...) are accepted both before
and after the command name, so ``pail --json stats jobs`` and ``pail stats
jobs --json`` mean the same. Each value goes into the one ``Options`` object
of the invocation; the environment and the defaults fill in what was not
given, with the precedence ``pail.config`` defines (option > environment >
default).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource

from pail.bounds import MAX_VISIBILITY_TIMEOUT
from pail.cli.params import EndpointUrl, Seconds
from pail.config import (
    ENV_BUCKET,
    ENV_ENDPOINT_URL,
    ENV_MAX_RETRIES,
    ENV_QUEUE,
    ENV_SHARDS,
    ENV_VISIBILITY_TIMEOUT,
    NOT_GIVEN,
    Settings,
    parse_max_retries,
    parse_shards,
)
from pail.errors import ConfigurationError
from pail.ids import validate_job_id
from pail.output import Output
from pail.queue import Pail
from pail.store.s3 import validate_bucket_name


@dataclass
class Options:
    """The global options of one invocation; None means "not given"."""

    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None
    queue: str | None = None
    visibility_timeout: float | None = None
    max_retries: str | None = None
    shards: str | None = None
    json: bool = False
    debug: bool = False

    def output(self) -> Output:
        return Output(json_mode=self.json, debug=self.debug)

    def settings(
        self, bucket: str, env: Mapping[str, str] | None = None, *, reclaim: bool | None = None
    ) -> Settings:
        """Resolve the queue settings: these options, then ``PAIL_*`` variables, then defaults.

        ``reclaim`` is the worker commands' ``--reclaim/--no-reclaim``.
        """
        return Settings.from_env(
            env,
            bucket=bucket,
            queue=self.queue,
            endpoint_url=self.endpoint_url,
            visibility_timeout=self.visibility_timeout,
            max_retries=(
                NOT_GIVEN if self.max_retries is None else parse_max_retries(self.max_retries)
            ),
            region=self.region,
            profile=self.profile,
            shards=None if self.shards is None else parse_shards(self.shards, "--shards"),
            reclaim=reclaim,
        )

    def connect(self, bucket: str, *, reclaim: bool | None = None) -> Pail:
        """A ``Pail`` for ``bucket`` with these options; boto3 finds credentials as usual."""
        return Pail.from_settings(self.settings(bucket, reclaim=reclaim))


def options(ctx: click.Context) -> Options:
    """The ``Options`` of this invocation (shared by the group and its commands)."""
    return ctx.ensure_object(Options)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    name = param.name
    if name is None or value is None or value is False:
        return value
    if ctx.get_parameter_source(name) is ParameterSource.DEFAULT:
        return value
    setattr(options(ctx), name, value)
    return value


def _option[F: Callable[..., Any]](*decls: str, **attrs: Any) -> Callable[[F], F]:
    return click.option(*decls, expose_value=False, callback=_remember, **attrs)


def global_options[F: Callable[..., Any]](func: F) -> F:
    """Add the global options to a command (and to the root group)."""
    decorators = [
        _option(
            "--endpoint-url",
            type=EndpointUrl(),
            metavar="URL",
            help=f"S3 endpoint, e.g. http://127.0.0.1:9000 for `pail server` [env {ENV_ENDPOINT_URL}].",
        ),
        _option("--profile", metavar="NAME", help="AWS profile [env AWS_PROFILE]."),
        _option("--region", metavar="REGION", help="AWS region [env AWS_REGION]."),
        _option(
            "--queue",
            metavar="NAME",
            help=f"Queue namespace inside the bucket [env {ENV_QUEUE}; default: none].",
        ),
        _option(
            "--visibility-timeout",
            type=Seconds(maximum=MAX_VISIBILITY_TIMEOUT, above_minimum=True),
            metavar="SECONDS",
            help=f"Lease length; give `reap` your workers' value [env {ENV_VISIBILITY_TIMEOUT}; default 30].",
        ),
        _option(
            "--max-retries",
            metavar="N|none",
            help=f"Retries before a job is dead-lettered [env {ENV_MAX_RETRIES}; default 3].",
        ),
        _option(
            "--shards",
            metavar="N",
            help=f"Shard prefixes the queue's keys spread over, a power of two [env {ENV_SHARDS}; default: what the queue's layout marker says, else 1].",
        ),
        _option("--json", "json", is_flag=True, help="Print JSON for scripts."),
        _option("--debug", is_flag=True, help="Show tracebacks and boto3 details on errors."),
    ]
    for decorate in reversed(decorators):
        func = decorate(func)
    return func


def bucket_argument[F: Callable[..., Any]](func: F) -> F:
    """An optional ``BUCKET`` argument that defaults to ``$PAIL_BUCKET``."""
    return click.argument("bucket", required=False, metavar="[BUCKET]")(func)


def resolve_bucket(bucket: str | None, env: Mapping[str, str] | None = None) -> str:
    """``bucket`` if given, else ``$PAIL_BUCKET``, else a usage error."""
    env = os.environ if env is None else env
    resolved = bucket or env.get(ENV_BUCKET)
    if not resolved:
        raise click.UsageError(f"missing BUCKET (give it, or set {ENV_BUCKET})")
    return resolved


def split_bucket(
    args: Sequence[str],
    names: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    instead: str = "",
) -> tuple[str, list[str]]:
    """Split ``[BUCKET] NAME...`` positionals: BUCKET may be left out when ``$PAIL_BUCKET`` is set.

    A usage error names what is missing: ``pail result jobs`` lacks the ID,
    not the bucket (a first argument that can be a bucket name is taken for
    one). ``instead`` is appended to it (``"or give --all"``).

    >>> split_bucket(["jobs", "01J"], ["ID"], {})
    ('jobs', ['01J'])
    >>> split_bucket(["jobs"], ["ID"], {})
    Traceback (most recent call last):
    ...
    click.exceptions.UsageError: missing ID after BUCKET 'jobs'
    """
    env = os.environ if env is None else env
    if len(args) == len(names) + 1:
        return args[0], list(args[1:])
    from_env = env.get(ENV_BUCKET)
    if len(args) == len(names) and from_env:
        return from_env, list(args)
    if len(args) > len(names) + 1:
        wanted = " ".join(["[BUCKET]", *names])
        raise click.UsageError(f"too many arguments: expected {wanted}, got {len(args)}")
    after = ""
    if from_env:
        missing = list(names[len(args) :])
    elif args and _can_be_bucket(args[0]):
        missing = list(names[len(args) - 1 :])
        after = f" after BUCKET {args[0]!r}"
    else:
        missing = ["BUCKET", *names[len(args) :]]
    hints = [f"BUCKET may come from {ENV_BUCKET}"] if missing[0] == "BUCKET" else []
    if instead:
        hints.append(instead)
    hint = f" ({'; '.join(hints)})" if hints else ""
    raise click.UsageError(f"missing {' and '.join(missing)}{after}{hint}")


def _can_be_bucket(text: str) -> bool:
    try:
        validate_bucket_name(text)
    except ConfigurationError:
        return False
    return True


def checked_id(job_id: str, *, stored: bool = False) -> str:
    """``job_id`` if it can name a job (``pail.ids.validate_job_id``), else a usage error.

    ``stored=True`` for commands that only read or remove what is in the
    bucket (a quarantined ``dlq/!x`` stays readable).

    >>> checked_id("01JD8X3W5K9T2B7Q4R6M0N1P2S")
    '01JD8X3W5K9T2B7Q4R6M0N1P2S'
    """
    try:
        return validate_job_id(job_id.strip(), stored=stored)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
