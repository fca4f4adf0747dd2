"""Option types that check values with the API's own validators (``pail.config``).

click's ``FloatRange`` lets ``nan`` and ``inf`` through (no comparison with
them is ever true); these refuse them, with the bounds the API documents,
as a usage error (exit 2). A malformed endpoint URL is one too, rather than
botocore's bare ``ValueError`` at connect time.
"""

from __future__ import annotations

from typing import Any

import click
from click.types import FloatParamType

from pail.bounds import MAX_SECONDS, validate_seconds
from pail.config import validate_endpoint_url
from pail.errors import ConfigurationError


class Seconds(FloatParamType):
    """A finite number of seconds within bounds.

    >>> Seconds(minimum=0.1).convert("2.5", None, None)
    2.5
    """

    name = "seconds"

    def __init__(
        self, *, minimum: float = 0.0, maximum: float = MAX_SECONDS, above_minimum: bool = False
    ) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.above_minimum = above_minimum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        label = param.name if param is not None and param.name else "value"
        number = super().convert(value, param, ctx)  # a float, or click's usage error
        try:
            return validate_seconds(
                label.replace("_", "-"),
                number,
                minimum=self.minimum,
                maximum=self.maximum,
                above_minimum=self.above_minimum,
            )
        except ConfigurationError as exc:
            self.fail(str(exc), param, ctx)


class EndpointUrl(click.ParamType[str, Any]):
    """An ``http(s)://`` endpoint URL, checked as the option is read: a bad one is a usage error.

    >>> EndpointUrl().convert("http://127.0.0.1:9000", None, None)
    'http://127.0.0.1:9000'
    """

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        source = f"--{param.name.replace('_', '-')}" if param is not None and param.name else "URL"
        try:
            return validate_endpoint_url(str(value), source=source)
        except ConfigurationError as exc:
            raise click.UsageError(str(exc), ctx) from None
