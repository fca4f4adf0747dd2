"""Every simulation test is bounded by ``SWEEP_TIMEOUT``, not pytest's 300 s default.

They are CPU-bound: their wall time grows with the machine's load (a 10,000-seed
sweep took over 300 s at load 10 on 2 cores while its CPU time was ~80 s a
process). A simulation fails on an invariant, never on time; the bound only stops
a hang. A test's own ``timeout`` mark, closer to it, still wins.
"""

from __future__ import annotations

import pytest

from tests.simulation.sweep import SWEEP_TIMEOUT


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/simulation/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.timeout(SWEEP_TIMEOUT), append=True)
