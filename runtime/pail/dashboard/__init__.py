"""``pail dashboard``: a local web UI for every queue in one bucket.

``Dashboard`` (``model``) reads through ``pail.operate`` at a bounded,
cached cost; ``DashboardServer`` (``server``) serves it on 127.0.0.1 with
server-rendered pages (``views``, ``chart``) and one small script that
refreshes them in place. ``docs/operate.md`` describes it.
"""

from pail.dashboard.model import Dashboard
from pail.dashboard.server import DashboardServer

__all__ = ["Dashboard", "DashboardServer"]
