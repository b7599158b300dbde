"""An engine tunes the garbage collector while it executes runs, and only then."""

from __future__ import annotations

import gc

import pytest

import cairn
from cairn.runtime import gc_tuning

from .kit import Kit


async def test_engine__tunes_the_collector_while_open_with_workers(kit: Kit) -> None:
    before = gc.get_threshold(), gc.get_freeze_count()
    async with kit.engine(workers=2):
        assert gc.get_threshold()[0] >= gc_tuning.YOUNG_THRESHOLD
        assert gc.get_freeze_count() > before[1]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


async def test_engine__tune_gc_false_or_no_workers_leaves_the_collector_alone(kit: Kit) -> None:
    before = gc.get_threshold(), gc.get_freeze_count()
    async with kit.engine(workers=2, tune_gc=False):
        assert (gc.get_threshold(), gc.get_freeze_count()) == before
    async with kit.engine(workers=0):
        assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_engine__tune_gc_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="tune_gc must be True or False, got 'no'"):
        cairn.Engine("sqlite:///:memory:", tune_gc="no")  # type: ignore[arg-type]
