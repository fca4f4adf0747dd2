"""Features beyond pailq 0.1.1, each over the fenced protocol: batch enqueue, cancellation, dedup keys.

``docs/protocol.md`` specifies each one's writes and crash analysis.
"""
