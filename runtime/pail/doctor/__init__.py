"""``pail doctor``: can pail run correctly against this endpoint, bucket and credentials?

A few requests under a scratch prefix (cleaned up after) test what the
protocol relies on: create-only PUT, compare-and-swap PUT, conditional
DELETE, consistent and byte-ordered listings; then a read of a missing key
under each state prefix (404, not 403), the server's clock against this
machine's, and, where readable, the bucket settings the construct expects.

The scratch prefix defaults to ``{queue}/run/pail-doctor-{token}-``: under
a prefix a worker role may write, so the probe runs with a worker's grants.
A crash of the doctor leaves a handful of such keys; the reaper treats them
as the foreign objects they are (dead-letters them as garbage, after the
visibility timeout), or delete them.

    >>> from pail import MemoryStore
    >>> report = run_doctor(MemoryStore("jobs"))
    >>> report.ok, report.verdict
    (True, 'pail can run here')
"""

from __future__ import annotations

from pail.doctor.probes import Probes
from pail.doctor.report import Check, DoctorReport, Outcome
from pail.doctor.settings import check_settings
from pail.ids import new_token
from pail.keys import RUN, Keys
from pail.store.base import Store
from pail.store.s3 import S3Store

__all__ = ["Check", "DoctorReport", "Outcome", "default_scratch_prefix", "run_doctor"]


def default_scratch_prefix(keys: Keys) -> str:
    """Where the probes write: under the queue's ``run/``, a name no job has."""
    return f"{keys.prefix(RUN)}pail-doctor-{new_token()}-"


def run_doctor(
    store: Store, keys: Keys | None = None, *, scratch_prefix: str | None = None
) -> DoctorReport:
    """Probe ``store`` and return the report; ``report.ok`` says whether pail can run there."""
    keys = keys or Keys()
    prefix = scratch_prefix or default_scratch_prefix(keys)
    endpoint = "memory"
    if isinstance(store, S3Store):
        endpoint = store.client.meta.endpoint_url or "AWS"
    report = DoctorReport(store.bucket, endpoint, prefix)
    probes = Probes(store, keys, prefix, report)
    if not probes.reach():
        return report
    try:
        probes.create_only()
        probes.compare_and_swap()
        probes.conditional_delete()
        probes.listing()
        probes.clock()
    finally:
        probes.clean_up()
    probes.missing_keys()
    if isinstance(store, S3Store):
        check_settings(report, store.client, store.bucket, keys)
    else:
        report.add("bucket settings", Outcome.SKIP, "not an S3 bucket")
    return report
