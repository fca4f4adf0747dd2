"""A populated queue on the real local S3 server, for the operator reads and actions."""

from __future__ import annotations

import pytest

from pail import Pail
from tests.support.population import Population, populate


@pytest.fixture
def population(pail: Pail) -> Population:
    return populate(pail)
