"""``python -m pail.runner work-once|work [options]``: ``pail work-once``/``work`` by another name.

For an image without the ``pail`` console script. It is the command line's
module, not the runner's: the runner (``pail.runner``, in the Lambda layer)
imports nothing of the CLI, so the arrows point one way (the CLI, and the
demo it starts, import the runner; never the reverse). It imports the CLI
inside ``main``, as nothing below the CLI imports it at import time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pail work-once`` or ``pail work`` with ``argv`` (default: the process's arguments)."""
    from pail.cli import run_command
    from pail.cli.exit_codes import EXIT_CONFIG

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("work-once", "work"):
        print("usage: python -m pail.runner {work-once,work} [options]", file=sys.stderr)
        return EXIT_CONFIG
    return run_command(args, prog_name="python -m pail.runner")


if __name__ == "__main__":
    sys.exit(main())
