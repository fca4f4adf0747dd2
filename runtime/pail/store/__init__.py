"""Storage backends behind one small interface (``Store``)."""

from pail.store.base import (
    ListPage,
    ObjectInfo,
    PrefixLister,
    PrefixPage,
    Store,
    StoredObject,
    WriteResult,
)
from pail.store.memory import MemoryStore
from pail.store.s3 import S3Store

__all__ = [
    "ListPage",
    "MemoryStore",
    "ObjectInfo",
    "PrefixLister",
    "PrefixPage",
    "S3Store",
    "Store",
    "StoredObject",
    "WriteResult",
]
