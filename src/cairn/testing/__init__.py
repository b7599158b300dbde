"""Testing helpers: a real engine on in-memory SQLite with a virtual clock, and replay."""

from __future__ import annotations

from cairn.testing.engine import SimulatedCrash, TestEngine
from cairn.testing.replay import replay

__all__ = ["SimulatedCrash", "TestEngine", "replay"]
