"""cdk-nag's AWS Solutions checks pass on the example app: every finding acknowledged, with a reason."""

from __future__ import annotations

from .conftest import Synthesis


def test_given_example_app_when_synthesised_with_cdk_nag_then_no_unacknowledged_finding(
    example: Synthesis,
) -> None:
    violations = [
        (violation["ruleName"], construct["constructPath"])
        for report in example.report.get("pluginReports", [])
        for violation in report.get("violations", [])
        for construct in violation["violatingConstructs"]
    ]
    assert violations == []
    assert example.error is None


def test_given_example_app_when_synthesised_then_every_acknowledgement_states_a_reason(
    example: Synthesis,
) -> None:
    acknowledged = {
        (path, rule): reason
        for path, rules in example.acknowledgements.items()
        for rule, reason in rules.items()
        if "AwsSolutions-" in rule  # CDK acknowledges some of its own rules too
    }
    assert acknowledged, "the example app acknowledges its findings next to the resources"
    for (path, rule), reason in acknowledged.items():
        assert len(reason.split()) >= 10, (path, rule, reason)
