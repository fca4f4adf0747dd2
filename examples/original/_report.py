"""The report handler the examples share, as in pailq 0.1.1's examples."""

from __future__ import annotations

import os
import time
from typing import Any

REPORT_SECONDS = float(os.environ.get("REPORT_SECONDS", "2"))


def build_report(payload: dict[str, Any]) -> dict[str, Any]:
    """Pretend to render a report for ``payload["report_id"]``."""
    time.sleep(REPORT_SECONDS)
    report_id = payload["report_id"]
    return {"report_id": report_id, "url": f"reports/{report_id}.pdf"}
