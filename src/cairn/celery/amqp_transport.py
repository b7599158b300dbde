"""kombu's RabbitMQ (py-amqp) transport, refusing a frame larger than the connection allows.

py-amqp reads a frame's header (type, channel, size) and then waits for `size` bytes,
whatever `size` says. Junk on the connection (a middlebox, a broker gone wrong) reads as
a header of up to 4 GB: the reader then waits for bytes that never come, and a publish
that checks for the broker's `connection.blocked` first reads with a timeout of 0, where
py-amqp retries EAGAIN in a loop. The dispatcher's publishing thread spun there for
ever, publishing nothing (its connection has no heartbeats for the broker to drop it).
A frame larger than the connection's frame_max is not AMQP: this transport raises a
connection error instead, and kombu and Celery reconnect as after a reset. Celery is
pointed here by `broker_transport` (cairn.celery.app); the wire is unchanged.
"""

from __future__ import annotations

from typing import Any

from amqp import transport as amqp_transport  # type: ignore[import-untyped]
from kombu.transport import pyamqp


class _Bounded:
    """A py-amqp transport whose reads are at most `largest` bytes (a frame's payload)."""

    largest = 131072

    def _read(self, n: int, *args: Any, **kwargs: Any) -> Any:
        if n > self.largest + 8:  # a payload, its frame-end octet, and slack
            raise OSError(
                f"the broker sent a frame of {n} bytes, over the connection's frame_max "
                f"({self.largest}): not AMQP; reconnecting"
            )
        return super()._read(n, *args, **kwargs)  # type: ignore[misc]


class _TCP(_Bounded, amqp_transport.TCPTransport):  # type: ignore[misc]
    pass


class _SSL(_Bounded, amqp_transport.SSLTransport):  # type: ignore[misc]
    pass


class Connection(pyamqp.Connection):
    """kombu's py-amqp connection, with `_Bounded` transports."""

    def Transport(
        self,
        host: str,
        connect_timeout: Any,
        ssl: Any = False,
        read_timeout: Any = None,
        write_timeout: Any = None,
        socket_settings: Any = None,
        **kwargs: Any,
    ) -> Any:
        """py-amqp's transport for this connection, refusing frames over its frame_max."""
        bounded = _SSL if ssl else _TCP
        made = bounded(
            host,
            connect_timeout=connect_timeout,
            ssl=ssl,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            socket_settings=socket_settings,
            **kwargs,
        )
        made.largest = int(self.frame_max)
        return made


class Transport(pyamqp.Transport):
    """kombu's py-amqp transport with `Connection`."""

    Connection = Connection


class SSLTransport(pyamqp.SSLTransport):
    """kombu's py-amqp transport over TLS (amqps://) with `Connection`."""

    Connection = Connection
