"""Limits: how many jobs of a queue (or of a group) may start, run at once, or start per period.

``rate``: at most R starts per window of the server's clock, per queue and
per group (``docs/limits.md``).
"""
