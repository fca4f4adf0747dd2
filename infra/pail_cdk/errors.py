"""Errors of the construct library, each with a message that says what to do."""

from __future__ import annotations


class PailCdkError(Exception):
    """Root of the errors ``pail_cdk`` raises on its own (not CDK's validation errors)."""


class LayerBuildError(PailCdkError):
    """The pail Lambda layer cannot be built; the message is one line and names the remedy."""
