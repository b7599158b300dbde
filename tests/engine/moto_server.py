"""A moto S3 server of a test's own (moto from PyPI), for the S3 blob store's tests.

The fixtures `moto_s3` and `s3_url` that start one are in conftest.py.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest


class MotoS3:
    """A moto S3 server of this test on a port of its own, that can be stopped and started."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"
        self.url = f"s3://cairn-test/blobs?endpoint={self.endpoint}"
        self.server: Any = None

    def start(self) -> None:
        import moto.server

        self.server = moto.server.ThreadedMotoServer(
            ip_address="127.0.0.1", port=self.port, verbose=False
        )
        self.server.start()

    def stop(self) -> None:
        self.server.stop()


def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    """A moto S3 server with the bucket `cairn-test`, stopped after (the fixture's body)."""
    pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = MotoS3(port)
    server.start()
    try:
        # moto keeps its buckets in the process, across servers: each test starts empty.
        httpx.post(f"{server.endpoint}/moto-api/reset").raise_for_status()
        boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket="cairn-test")
        yield server
    finally:
        server.stop()
