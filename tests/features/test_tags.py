"""Tags: checked at the edge, carried by the job through every state, shown by status()."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pail import ConfigurationError, JobState, Pail
from pail.keys import INDEX
from pail.tags import MAX_TAGS, decode_metadata, encode_metadata
from tests.support.counting import RequestCounter

TAGS = {"customer": "acme", "kind": "export"}


@pytest.mark.parametrize(
    ("tags", "says"),
    [
        ({"bad key": "x"}, "tag key 'bad key'"),
        ({"-lead": "x"}, "starting with a letter or digit"),
        ({"k" * 33: "x"}, "1 to 32 characters"),
        ({"customer": ""}, "1 to 64 printable"),
        ({"customer": "a" * 65}, "1 to 64 printable"),
        ({"customer": "line\nbreak"}, "no control characters"),
        ({"customer": 42}, "1 to 64 printable"),
        ({f"k{n}": "v" for n in range(MAX_TAGS + 1)}, f"at most {MAX_TAGS} tags"),
        ({f"k{n}": "\u00e5" * 64 for n in range(MAX_TAGS)}, "bytes URL-encoded"),
        (["customer", "acme"], "must be (a|one) mapping"),
    ],
)
def test_given_bad_tags_when_enqueue_then_configuration_error_and_nothing_written(
    pail: Pail, counter: RequestCounter, tags: object, says: str
) -> None:
    before = counter.total()
    with pytest.raises(ConfigurationError, match=says):
        pail.enqueue({"n": 1}, tags=tags)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=says):
        pail.enqueue_many([{"n": 1}], tags=tags)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=says):
        pail.enqueue_once({"n": 1}, key="k", tags=tags)  # type: ignore[arg-type]
    assert counter.total() == before
    assert pail.stats().pending == 0


def test_given_tags_when_enqueued_then_status_shows_them_in_every_state(pail: Pail) -> None:
    job_id = pail.enqueue({"n": 1}, tags=TAGS)
    status = pail.status(job_id)
    assert status is not None and status.tags == TAGS and status.state is JobState.PENDING

    message = pail.claim()
    assert message is not None
    running = pail.status(job_id)
    assert running is not None and running.state is JobState.RUNNING and running.tags == TAGS
    message.complete({"ok": True})

    done = pail.status(job_id)
    assert done is not None and done.state is JobState.DONE and done.tags == TAGS
    assert done.to_json()["tags"] == TAGS
    assert pail.result(job_id) == {"ok": True}  # the result stays the handler's value alone


def test_given_tagged_job_when_it_fails_for_good_then_the_dead_letter_keeps_its_tags(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=1)
    job_id = pail.enqueue({"n": 1}, tags=TAGS)

    def boom(payload: object) -> None:
        raise RuntimeError("no")

    assert pail.work_once(boom)  # attempt 1: retried, the retry entry keeps the tags
    retry = pail.status(job_id)
    assert retry is not None and retry.tags == TAGS
    assert pail.work_once(boom)  # attempt 2: dead-lettered

    failed = pail.status(job_id)
    assert failed is not None and failed.state is JobState.FAILED and failed.tags == TAGS
    (letter,) = pail.dead_letters()
    assert letter.tags == TAGS
    pail.redrive(job_id)
    redriven = pail.status(job_id)
    assert redriven is not None and redriven.state is JobState.PENDING and redriven.tags == TAGS


def test_given_tags_when_stored_then_the_envelope_keeps_pailq_shape(pail: Pail) -> None:
    job_id = pail.enqueue({"n": 1}, tags=TAGS)

    (entry,) = [i for i in pail.store.list("queue/").items]
    body = json.loads(pail.store.get(entry.key).body)  # type: ignore[union-attr]
    # pailq 0.1.1 reads "payload" and "attempts"; the tags are one more field beside them.
    assert body["payload"] == {"n": 1} and body["attempts"] == 0 and body["tags"] == TAGS
    index = sorted(i.key for i in pail.store.list(INDEX).items)
    assert index == [f"{INDEX}tag/customer=acme/{job_id}", f"{INDEX}tag/kind=export/{job_id}"]


def test_given_untagged_jobs_when_enqueued_then_one_put_each_and_no_index(
    pail: Pail, counter: RequestCounter
) -> None:
    pail.enqueue({"n": 0})  # the layout marker's read, once per Pail
    before = counter.by_operation
    pail.enqueue({"n": 1})
    pail.enqueue_once({"n": 2}, key="two")
    pail.enqueue_many([{"n": 3}, {"n": 4}])

    spent = counter.by_operation - before
    assert spent == {"PutObject": 5}  # an entry each, and the dedup record
    assert pail.store.list(INDEX).items == ()


def test_given_tags_when_enqueued_then_one_more_put_per_tag(
    pail: Pail, counter: RequestCounter
) -> None:
    pail.enqueue({"n": 0})
    before = counter.by_operation
    pail.enqueue({"n": 1}, tags=TAGS)

    assert counter.by_operation - before == {"PutObject": 1 + len(TAGS)}


def test_given_per_item_tags_when_enqueue_many_then_each_job_has_its_own(pail: Pail) -> None:
    ids = pail.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}], tags=[{"customer": "a"}, None, TAGS])

    shown = [pail.status(job_id) for job_id in ids]
    assert [s.tags if s else None for s in shown] == [{"customer": "a"}, {}, TAGS]
    with pytest.raises(ConfigurationError, match="one per payload"):
        pail.enqueue_many([{"n": 1}], tags=[TAGS, TAGS])


def test_given_keyed_enqueue_with_tags_then_status_and_index_have_them(pail: Pail) -> None:
    made = pail.enqueue_once({"n": 1}, key="order-1", tags=TAGS)

    status = pail.status(made.id)
    assert status is not None and status.tags == TAGS
    assert [j.id for j in pail.search(tags={"kind": "export"}).jobs] == [made.id]


def test_given_foreign_tags_in_an_entry_when_read_then_dropped_and_the_job_runs(
    pail: Pail,
) -> None:
    pail.store.put(
        "queue/01J0000000000000000000000A",
        b'{"payload": {"n": 1}, "attempts": 0, "tags": {"bad key": "\\u0000", "x": 1}}',
    )
    status = pail.status("01J0000000000000000000000A")
    assert status is not None and status.tags == {}
    assert pail.work_once(lambda payload: {"ran": payload})
    assert pail.result("01J0000000000000000000000A") == {"ran": {"n": 1}}


def test_given_metadata_text_when_decoded_then_round_trips_or_is_dropped() -> None:
    tags = {"customer": "\u00c5sa & co/eu=1", "kind": "<script>alert(1)</script>"}
    assert decode_metadata(encode_metadata(tags)) == tags
    assert encode_metadata(tags).isascii()
    for junk in ("%ff=1", "a=1&a=2", "bad key=1", "=", "x"):
        assert decode_metadata(junk) == {}
