"""The fenced lease protocol, as plain logic over the ``Store`` port.

``docs/protocol.md`` is its specification: every step of every transition and
what a crash right after it leaves behind.
"""
