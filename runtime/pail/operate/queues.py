"""The queues in a bucket: the default queue and every namespace.

A queue is a key prefix: the default queue's state prefixes are at the
bucket's root (``queue/``, ``run/``, ``done/``, ``dlq/``), a namespace's under
``{namespace}/``. ``list_queues`` lists the bucket's top-level folders (one
request per 1,000 folders, S3's ``Delimiter``), then the folders of each
candidate namespace (one request each), and calls a folder a queue when it
holds a state prefix. Everything else at the top level is foreign: loose
keys, folders of other applications, names that cannot be namespaces.

Cost: ``1 + n`` LIST requests for ``n`` candidate namespaces, at most
``max_queues`` of them (beyond that the result is marked inexact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pail.keys import ALL_PREFIXES, DEDUP, SYSTEM, validate_namespace
from pail.store.base import PrefixLister, Store

DEFAULT_MAX_QUEUES = 100
# _pail/ too: a queue paused before its first job (or holding only its reaper's
# cursor or its layout marker) is a queue, and the default queue's _pail/ is not
# a foreign folder.
_MARKERS = frozenset((*ALL_PREFIXES, DEDUP, SYSTEM))


@dataclass(frozen=True, slots=True)
class QueueList:
    """The queues found (``""`` is the default queue) and the foreign top-level names."""

    queues: tuple[str, ...]
    foreign: tuple[str, ...]
    exact: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"queues": list(self.queues), "foreign": list(self.foreign), "exact": self.exact}


def _is_namespace(name: str) -> bool:
    try:
        validate_namespace(name)
    except ValueError:
        return False
    return bool(name)


def list_queues(store: Store, *, max_queues: int = DEFAULT_MAX_QUEUES) -> QueueList:
    """Every queue in the store's bucket, default queue first, then namespaces in name order.

    >>> from pail import Pail, MemoryStore
    >>> store = MemoryStore("jobs")
    >>> _ = Pail(store).enqueue({"n": 1}), Pail(store, queue="reports").enqueue({"n": 2})
    >>> list_queues(store).queues
    ('', 'reports')
    """
    if not isinstance(store, PrefixLister):
        # A store without delimited listings (a test wrapper): only the default queue is known.
        return QueueList(("",), (), exact=False)
    top: list[str] = []
    loose: list[str] = []
    token: str | None = None
    exact = True
    for _ in range(max(1, max_queues // 1000 + 1)):
        try:
            page = store.list_prefixes("", continuation=token)
        except NotImplementedError:  # a wrapper around a store without them
            return QueueList(("",), (), exact=False)
        top.extend(page.prefixes)
        loose.extend(info.key for info in page.keys)
        token = page.next_token
        if token is None:
            break
    else:
        exact = False
    queues: list[str] = []
    foreign: list[str] = list(loose)
    if any(prefix in _MARKERS for prefix in top):
        queues.append("")
    checked = 0
    for prefix in top:
        if prefix in _MARKERS:
            continue
        name = prefix[:-1]
        if not _is_namespace(name):
            foreign.append(prefix)
            continue
        if checked >= max_queues:
            exact = False
            break
        checked += 1
        inner = store.list_prefixes(prefix)
        if any(sub.removeprefix(prefix) in _MARKERS for sub in inner.prefixes):
            queues.append(name)
        else:
            foreign.append(prefix)
    return QueueList(tuple(queues), tuple(foreign), exact)


def queue_label(namespace: str) -> str:
    """How people see a queue's name: the namespace, or ``(default)``.

    >>> queue_label(""), queue_label("reports")
    ('(default)', 'reports')
    """
    return namespace or "(default)"
