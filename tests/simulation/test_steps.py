"""The known-bad variants' one seam (``steps.py``): a variant goes where the runtime looks its step up."""

from __future__ import annotations

import pytest

from pail import codec
from pail.protocol import cancel, transitions
from pail.protocol.claim import Claimer
from pail.protocol.lease import Lease
from tests.simulation import steps


def test_given_every_step_when_looked_up_then_it_is_the_runtimes_own() -> None:
    assert len(steps.STEPS) >= 15
    assert all(step.current is step.like for step in steps.STEPS)


def test_given_a_function_step_when_replaced_then_every_module_that_imported_it_sees_the_variant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writers = (vars(transitions), vars(cancel))  # the modules that write markers

    steps.MARKER_BYTES.replace(monkeypatch, lambda token: b"null")

    assert [writer["marker_body"]("0f") for writer in writers] == [b"null", b"null"]

    monkeypatch.undo()
    assert all(writer["marker_body"] is codec.marker_body for writer in writers)


def test_given_a_method_step_when_replaced_then_the_class_has_the_variant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def proven(self: Claimer, lease: Lease) -> bool:
        return True

    steps.CLAIM_PROVE_LEASE.replace(monkeypatch, proven)

    assert Claimer._proven is proven


def test_given_a_variant_of_another_shape_when_replaced_then_it_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(TypeError, match=r"Claimer\._proven takes \['self'\], the step now takes"):
        steps.CLAIM_PROVE_LEASE.replace(monkeypatch, lambda self: True)  # type: ignore[arg-type,misc]

    assert Claimer._proven is steps.CLAIM_PROVE_LEASE.like
