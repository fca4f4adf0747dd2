"""``python -m pail.cli``: the ``pail`` command without the console script."""

from pail.cli import main

main()
