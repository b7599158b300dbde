"""kombu's RabbitMQ (py-amqp) transport, refusing a frame larger than the connection allows.

py-amqp reads a frame's header (type, channel, size) and then waits for `size` bytes,
whatever `size` says. Junk on the connection (a middlebox, a broker gone wrong) reads as
a header of up to 4 GB: the reader then waits for bytes that never come, and a publish
that checks for the broker's `connection.blocked` first reads with a timeout of 0, where
py-amqp retries EAGAIN in a loop. The dispatcher's publishing thread spun there for
ever, publishing nothing (its connection has no heartbeats for the broker to drop it).
A frame larger than the connection's frame_max is not AMQP: this transport raises a
connection error instead, and kombu and Celery reconnect as after a reset. Junk that
reads as a small header spun the same way, waiting for the rest of a frame that never
comes: within a frame, a read that would block waits for the socket instead, and a frame
whose rest does not come within `patience` seconds (a broker sends a frame whole) is a
connection error too. Celery is pointed here by `broker_transport` (cairn.celery.app);
the wire is unchanged.
"""

from __future__ import annotations

import selectors
import socket
import ssl
from collections.abc import Callable
from typing import Any

from amqp import transport as amqp_transport  # type: ignore[import-untyped]
from kombu.transport import pyamqp


class _Bounded:
    """A py-amqp transport that refuses frames over `largest` bytes, or cut short.

    A frame's payload is at most `largest` bytes; once its header has come, the rest
    must come within `patience` seconds.
    """

    largest = 131072
    patience = 5.0
    _within_frame = False  # reading past a frame's header (py-amqp: not `initial`)
    _quick_recv: Callable[[int], bytes]  # py-amqp's socket read, set up on connecting

    def _setup_transport(self) -> None:
        super()._setup_transport()  # type: ignore[misc]
        self._quick_recv = self._patient(self._quick_recv)

    def _read(self, n: int, initial: bool = False, *args: Any, **kwargs: Any) -> Any:
        if n > self.largest + 8:  # a payload, its frame-end octet, and slack
            raise OSError(
                f"the broker sent a frame of {n} bytes, over the connection's frame_max "
                f"({self.largest}): not AMQP; reconnecting"
            )
        self._within_frame = not initial
        return super()._read(n, initial, *args, **kwargs)  # type: ignore[misc]

    def _patient(self, recv: Callable[[int], bytes]) -> Callable[[int], bytes]:
        """`recv`, waiting within a frame where py-amqp would retry a read at once.

        A read with a timeout of 0 raises "would block" when nothing has come; py-amqp
        retries it in a loop unless it is a frame's first read.
        """

        def patient(size: int) -> bytes:
            try:
                return recv(size)
            except (BlockingIOError, ssl.SSLWantReadError):
                if not self._within_frame:
                    raise
            if not _readable(self.sock, self.patience):  # type: ignore[attr-defined]
                raise OSError(
                    f"the broker began a frame and sent nothing more for {self.patience:g} "
                    "s: not AMQP; reconnecting"
                )
            return recv(size)

        return patient


def _readable(sock: socket.socket, within: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return bool(selector.select(within))


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
