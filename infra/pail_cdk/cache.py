"""Where built layer parts and image contexts are kept: a cache outside the user's source tree.

Default: ``$XDG_CACHE_HOME/pail-cdk`` (``~/.cache/pail-cdk``; on macOS
``~/Library/Caches/pail-cdk``). ``PAIL_CDK_CACHE`` or a construct's
``cache_dir`` moves it; an explicit argument beats the variable.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

ENV_CACHE = "PAIL_CDK_CACHE"
"""Environment variable: the cache folder."""

_NAME = "pail-cdk"


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``explicit``, else ``$PAIL_CDK_CACHE``, else the user's cache folder.

    >>> str(cache_dir("/tmp/x"))
    '/tmp/x'
    """
    if explicit is not None:
        return Path(explicit)
    configured = os.environ.get(ENV_CACHE)
    if configured:
        return Path(configured)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / _NAME
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / _NAME


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed): one builder per cache entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prune(folder: Path, pattern: str, *, keep: Path, newest: int = 4) -> None:
    """Delete all but the ``newest`` entries matching ``pattern`` (``keep`` always stays)."""
    entries = sorted(folder.glob(pattern), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in entries[newest:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


def copy_tree(source: Path, destination: Path) -> None:
    """Copy ``source`` into ``destination``, hard-linking files when both share a disk."""

    def link_or_copy(src: str, dst: str) -> object:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        return dst

    shutil.copytree(source, destination, copy_function=link_or_copy, dirs_exist_ok=True)
