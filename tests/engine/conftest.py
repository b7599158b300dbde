"""Fixtures of the engine tests; each runs on both stores through `store_url`."""

from __future__ import annotations

import pytest

from .kit import Gate, Kit


@pytest.fixture
def kit(store_url: str) -> Kit:
    """A private registry on a fresh database of each store."""
    return Kit(store_url)


@pytest.fixture
def gate() -> Gate:
    """A fresh gate."""
    return Gate()


@pytest.fixture
def offline_kit() -> Kit:
    """A private registry for tests that need no database."""
    return Kit("")
