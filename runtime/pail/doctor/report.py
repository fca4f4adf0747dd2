"""What ``pail doctor`` found: one ``Check`` per capability, and a verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    """A check's result. Only ``fail`` means pail cannot run correctly there."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report: what was checked, its outcome, and why."""

    name: str
    outcome: Outcome
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"check": self.name, "outcome": self.outcome.value, "detail": self.detail}


@dataclass
class DoctorReport:
    """Every check run against one bucket, in order."""

    bucket: str
    endpoint: str
    scratch_prefix: str
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, outcome: Outcome, detail: str) -> Check:
        check = Check(name, outcome, detail)
        self.checks.append(check)
        return check

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.outcome is Outcome.FAIL]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.outcome is Outcome.WARN]

    @property
    def ok(self) -> bool:
        """True when nothing failed: pail can run correctly here (warnings aside)."""
        return not self.failed

    @property
    def verdict(self) -> str:
        if self.failed:
            names = ", ".join(c.name for c in self.failed)
            return f"pail cannot run correctly here: {names}"
        if self.warnings:
            return f"pail can run here, with {len(self.warnings)} warning(s)"
        return "pail can run here"

    def to_json(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "endpoint": self.endpoint,
            "scratch_prefix": self.scratch_prefix,
            "ok": self.ok,
            "verdict": self.verdict,
            "checks": [c.to_json() for c in self.checks],
        }
