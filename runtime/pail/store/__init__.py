"""Storage backends behind one small interface (``Store``)."""

from pail.store.base import ListPage, ObjectInfo, Store, StoredObject, WriteResult
from pail.store.memory import MemoryStore
from pail.store.s3 import S3Store

__all__ = [
    "ListPage",
    "MemoryStore",
    "ObjectInfo",
    "S3Store",
    "Store",
    "StoredObject",
    "WriteResult",
]
