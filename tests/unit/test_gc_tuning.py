"""The collector's tuning while engines execute runs: nested holds, and what is restored."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cairn.runtime import gc_tuning


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    """Each test starts from Python's defaults, and the process gets its settings back."""
    saved = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    yield
    while gc_tuning._holders:
        gc_tuning.release()
    gc.unfreeze()
    gc.set_threshold(*saved)


def test_hold__freezes_and_raises_the_young_threshold_until_released() -> None:
    gc_tuning.hold()
    assert gc.get_threshold() == (gc_tuning.YOUNG_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() > 0
    gc_tuning.release()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_hold__nested_holds_restore_only_at_the_last_release() -> None:
    gc_tuning.hold()
    gc_tuning.hold()
    gc_tuning.release()
    assert gc.get_threshold()[0] == gc_tuning.YOUNG_THRESHOLD
    assert gc.get_freeze_count() > 0
    gc_tuning.release()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_hold__a_process_that_froze_objects_itself_keeps_them_frozen() -> None:
    gc.freeze()
    gc_tuning.hold()
    gc_tuning.release()
    # Still frozen, not unfrozen by release (the count itself may drop: frozen objects
    # that die leave the frozen set, as in a full test run's process).
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (700, 10, 10)


def test_hold__a_higher_threshold_or_collection_switched_off_is_kept() -> None:
    gc.set_threshold(50_000, 5, 5)
    gc_tuning.hold()
    assert gc.get_threshold() == (50_000, 5, 5)
    gc_tuning.release()
    gc.set_threshold(0, 10, 10)
    gc_tuning.hold()
    assert gc.get_threshold() == (0, 10, 10)
    gc_tuning.release()
    assert gc.get_threshold() == (0, 10, 10)


def test_release__without_a_hold_changes_nothing() -> None:
    gc_tuning.release()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
