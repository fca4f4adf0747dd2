"""The suite's scheduling list names files that exist: a renamed file would silently start late."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST, SYNTHESISED_APPS, SYNTHESISED_UNIT

ROOT = Path(__file__).resolve().parents[2]


def test_given_the_longest_first_list_then_every_unit_it_names_is_a_test_file_or_the_apps() -> None:
    missing = [u for u in LONGEST_FIRST if u != SYNTHESISED_UNIT and not (ROOT / u).is_file()]

    assert missing == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_given_the_synthesised_apps_then_each_is_a_test_file() -> None:
    assert SYNTHESISED_APPS
    assert [app for app in SYNTHESISED_APPS if not (ROOT / app).is_file()] == []
