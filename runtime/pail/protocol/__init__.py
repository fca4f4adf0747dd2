"""The fenced lease protocol, as plain logic over the ``Store`` port: every state change.

``docs/protocol.md`` is its specification: every step of every transition and
what a crash right after it leaves behind. Each write of a job's state is an
operation here, and nowhere else:

* ``enqueue``: a job's first pending entry (one, or many at once);
* ``dedup``: at most one job per key; ``delay``: delayed and high-priority
  entries, and their promotion;
* ``claim``, ``lease``, ``settle`` (complete, fail, release),
  ``transitions`` (requeue, dead-letter), ``outcome`` (``done/{id}``);
* ``cancel``, ``redrive`` (and finishing a half-done one), ``reaper`` and
  ``reap_cursor``; ``retry``: the backoff policy;
* ``writes``: the conditional writes every one of them goes through.

Modules here import only each other, ``pail.store``, and the leaf modules
(``codec``, ``jsonsafe``, ``keys``, ``ids``, ``clock``, ``errors``, and
``config``'s validators); ``tests/unit/test_architecture.py`` checks it.
"""
