"""The bucket settings the ``PailQueue`` construct sets up, compared with the bucket's.

* lifecycle rules that expire ``done/`` and ``dlq/`` (optional TTLs) and abort
  incomplete multipart uploads;
* a CORS rule allowing GET from the status page's origin (optional);
* EventBridge delivery, which the event-driven worker trigger needs.

None of these decide whether pail runs correctly, so the worst outcome here
is a warning; a setting the credentials may not read is skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pail.doctor.report import DoctorReport, Outcome
from pail.keys import DLQ, DONE, Keys
from pail.store.s3_settings import (
    BucketSetting,
    SettingState,
    read_cors,
    read_lifecycle,
    read_notifications,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def _skipped(report: DoctorReport, name: str, setting: BucketSetting) -> bool:
    if setting.state is SettingState.DENIED:
        report.add(name, Outcome.SKIP, "not readable with these credentials")
        return True
    if setting.state is SettingState.UNSUPPORTED:
        report.add(name, Outcome.SKIP, f"the server does not implement it ({setting.message})")
        return True
    if setting.state is SettingState.ERROR:
        report.add(name, Outcome.SKIP, f"could not read it: {setting.message}")
        return True
    return False


def _rule_prefix(rule: dict[str, Any]) -> str:
    filtered = rule.get("Filter") or {}
    prefix = filtered.get("Prefix")
    if prefix is None:
        prefix = (filtered.get("And") or {}).get("Prefix")
    if prefix is None:
        prefix = rule.get("Prefix", "")
    return str(prefix or "")


def check_lifecycle(report: DoctorReport, setting: BucketSetting, keys: Keys) -> None:
    name = "lifecycle rules"
    if _skipped(report, name, setting):
        return
    rules = [r for r in (setting.value or {}).get("Rules", []) if r.get("Status") == "Enabled"]
    if not rules:
        report.add(
            name,
            Outcome.WARN,
            "none: results and dead letters are kept forever (the construct can expire done/ and "
            "dlq/, and aborts stale multipart uploads)",
        )
        return
    covered = [
        p for p in (DONE, DLQ) if any(keys.prefix(p).startswith(_rule_prefix(r)) for r in rules)
    ]
    expiring = ", ".join(keys.prefix(p) for p in covered) or "no state prefix"
    report.add(name, Outcome.PASS, f"{len(rules)} enabled rule(s); they cover {expiring}")


def check_cors(report: DoctorReport, setting: BucketSetting) -> None:
    name = "CORS (browser status page)"
    if _skipped(report, name, setting):
        return
    if setting.state is SettingState.ABSENT:
        report.add(
            name,
            Outcome.PASS,
            "no rule: the browser status page cannot read this bucket from another origin "
            "(only needed for that page)",
        )
        return
    rules = (setting.value or {}).get("CORSRules", [])
    gets = [r for r in rules if "GET" in r.get("AllowedMethods", [])]
    origins = sorted({o for r in gets for o in r.get("AllowedOrigins", [])})
    report.add(name, Outcome.PASS, f"GET allowed from {', '.join(origins) or 'no origin'}")


def check_eventbridge(report: DoctorReport, setting: BucketSetting) -> None:
    name = "EventBridge notifications"
    if _skipped(report, name, setting):
        return
    if setting.state is SettingState.PRESENT and "EventBridgeConfiguration" in (
        setting.value or {}
    ):
        report.add(name, Outcome.PASS, "delivery to EventBridge is on")
        return
    report.add(
        name,
        Outcome.WARN,
        "off: the construct's event-driven worker trigger would never fire "
        "(polling workers and the reaper's schedule are unaffected)",
    )


def check_settings(report: DoctorReport, client: S3Client, bucket: str, keys: Keys) -> None:
    """Read the three settings (3 requests) and add a check for each."""
    check_lifecycle(report, read_lifecycle(client, bucket), keys)
    check_cors(report, read_cors(client, bucket))
    check_eventbridge(report, read_notifications(client, bucket))
