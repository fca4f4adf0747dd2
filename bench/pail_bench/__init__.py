"""pail's benchmark against the original pailq 0.1.1, run by ``scripts/bench``.

The orchestrator (``scenarios``) runs in the project's venv; each side runs in
its own process through ``driver``, which imports only the standard library,
boto3 and whichever ``pail`` its interpreter has. Nothing in this package may
import the project's ``pail`` at module level except the orchestrator's own
modules, which never run inside the original's venv.
"""
