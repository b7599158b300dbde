"""kombu's Redis transport with one client per channel instead of one per command.

kombu's Redis channel makes a new `redis.Redis` for each publish, each message's record
as unacknowledged and each acknowledgement (`Channel.conn_or_acquire` without a client):
about 140 µs of Python apiece (its table of reply parsers), three a message, more than a
short run costs cairn. A `redis.Redis` over a connection pool is safe to share between
threads (every command takes a connection from the pool), so this channel makes one per
pool and hands it out again; a pool kombu replaces (after a disconnection) gets a new one.
Celery is pointed here by `broker_transport` (cairn.celery.app); the wire is unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kombu.transport import redis


class Channel(redis.Channel):
    """kombu's Redis channel, handing out one client per connection pool."""

    _cairn_client: Any = None

    @contextlib.contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        """`client`, else this channel's client over its current pool (made once per pool)."""
        if client:
            yield client
            return
        shared = self._cairn_client
        if shared is None or shared.connection_pool is not self.pool:
            shared = self._cairn_client = self._create_client()  # type: ignore[no-untyped-call]
        yield shared


class Transport(redis.Transport):
    """kombu's Redis transport with `Channel`."""

    Channel = Channel
