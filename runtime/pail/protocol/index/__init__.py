"""The search index of tagged jobs: which jobs carry a tag, as a key range.

A tagged job gets one empty object per tag, written by its producer before
the job's entry (``entries.write``)::

    {root}_pail/index/tag/{key}={url-encoded value}/{job id}

Nothing else is written, by anyone: an untagged job costs nothing here, a job
with ``n`` tags costs ``n`` PUTs at enqueue. Because job ids are ULIDs, the
entries of one tag list in enqueue order, so "jobs tagged customer=acme
enqueued in the last two hours" is one key range under the tag's prefix
(``ranges``): ``StartAfter`` the first id of the window, stop at the first id
past it. A listing returns 1,000 keys, so a tag with ``m`` matching jobs costs
``ceil(m / 1000)`` LISTs however many jobs the queue holds.

The index is a hint, never the truth: a reader resolves every id it finds to
the job's status, and a key that names no job (foreign bytes, a folder
marker, a malformed tag) is skipped, never raised. An entry outlives nothing
it should not: the construct expires ``_pail/index/`` with the results
(``result_ttl``), and a search that finds an old entry whose job is gone
deletes it (``entries.forget``).
"""

from pail.protocol.index.entries import entry_key, forget, parse_entry, tag_prefix, write
from pail.protocol.index.ranges import Window, candidates

__all__ = [
    "Window",
    "candidates",
    "entry_key",
    "forget",
    "parse_entry",
    "tag_prefix",
    "write",
]
