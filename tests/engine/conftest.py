"""Fixtures of the engine tests; each runs on both stores through `store_url`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .kit import Gate, Kit
from .moto_server import MotoS3, started


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


@pytest.fixture
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    """A bucket on a moto S3 server of this test (moto's buckets outlive a restart)."""
    yield from started(monkeypatch)


@pytest.fixture
def s3_url(moto_s3: MotoS3) -> str:
    """A bucket on a moto S3 server of this test, as an `s3://` blobs URL."""
    return moto_s3.url
