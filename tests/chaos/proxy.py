"""TCP proxies to PostgreSQL that lose replies, or hang connections.

`LosingProxy` forwards both ways, and watches the server's replies for the CommandComplete
of a write (INSERT, UPDATE, DELETE) or of a COMMIT (or of the commands it is given, such
as "SELECT 25": a read of 25 rows). With probability `rate` it then lets
the server finish (it has the statement and its Sync already), waits a moment, and cuts
the connection without passing the reply on: the write is in the database and the client
never hears so. The connection drop after COMMIT that a flapping network produces.

`FreezingProxy` hangs the connections open at a moment, while new ones pass: a failover
or a hung middlebox, seen from a worker whose connections were open then. It also resets
every connection at once (a broken network path, a restarted middlebox), and with
`freeze(new=True)` hangs the connections opened later too (a broker that keeps TCP open
but answers nothing), until `restore`: then new connections pass, and a client that
does not give up on its frozen ones hangs for ever. `garble` writes junk to the clients
of the open connections, in the middle of the server's replies.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import struct
import threading
import time
from collections import Counter

# The commands whose replies a LosingProxy loses, unless told others (`kinds`).
WRITES = ("INSERT", "UPDATE", "DELETE", "COMMIT")


class LosingProxy:
    """Listen on a free port and pass connections to `target`, losing some replies."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        rate: float,
        budget: int,
        kinds: tuple[str, ...] = WRITES,
        then_down: bool = False,
    ) -> None:
        """`then_down`: once a reply is lost, the network stays down (every connection is
        cut at its next byte and new ones are closed): the client cannot ask what became
        of the write."""
        self.target = target
        self.then_down = then_down
        self.down = False
        # CommandComplete: 'C', a 4-byte length, then a tag such as "INSERT 0 1" or "COMMIT".
        self._tag = re.compile(rb"C\x00\x00\x00.(%s)\b" % "|".join(kinds).encode(), re.DOTALL)
        self.rate = rate
        self.budget = budget
        self.lost: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._random = random.Random(11)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _lose(self, data: bytes) -> str | None:
        """The kind of write whose reply to lose in `data`, or None to pass it on."""
        match = self._tag.search(data)
        if match is None:
            return None
        with self._lock:
            if sum(self.lost.values()) >= self.budget or self._random.random() >= self.rate:
                return None
            kind = match.group(1).decode()
            self.lost[kind] += 1
            self.down = self.then_down
            return kind

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data or self.down:
                    break
                if replies and self._lose(data):
                    time.sleep(0.05)  # the server finishes the transaction meanwhile
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


class _Link:
    """One proxied connection: its two sockets, and what it holds back while frozen."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.lock = threading.Lock()
        self.frozen = False
        # Bytes received while frozen, per direction (b"" marks the end of the stream).
        self.held: dict[bool, list[bytes]] = {False: [], True: []}

    def sink(self, replies: bool) -> socket.socket:
        return self.client if replies else self.server


class FreezingProxy:
    """Listen on a free port and pass connections to `target`; `freeze` hangs the open ones.

    A frozen connection stays open at both ends and forwards nothing: no error, no reply,
    no reset. The kernel still acknowledges what the client sends (the proxy is alive),
    the way a hung proxy or pooler behaves; TCP keepalives cannot tell it from a healthy
    one. Connections opened after `freeze` pass as usual. `thaw` delivers what was held,
    late, and lets the frozen connections go on.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        self._hang_new = False
        self._hung: list[socket.socket] = []  # accepted while hanging new ones, never served
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def freeze(self, *, new: bool = False) -> int:
        """Hang every connection open now (and, with `new`, those opened later); how many."""
        with self._lock:
            links = list(self._links)
            self._hang_new = self._hang_new or new
        for link in links:
            with link.lock:
                link.frozen = True
        return len(links)

    def open_links(self) -> int:
        """How many connections pass through now."""
        with self._lock:
            return len(self._links)

    def reset(self) -> int:
        """Reset every connection now, both ways (RST, no FIN); how many were open.

        The links are frozen first, so that neither pump passes an end of stream on while
        the other side is being reset.
        """
        with self._lock:
            links, self._links = self._links, []
            hung, self._hung = self._hung, []
        for link in links:
            with link.lock:
                link.frozen = True
        for sock in [s for link in links for s in (link.client, link.server)] + hung:
            _abort(sock)
        return len(links)

    def garble(self, junk: bytes = b"\x08\xff garbage \xce\x00\x00junk\r\n" * 4) -> int:
        """Write `junk` into every open connection, to the client, as if the server had
        sent it (a middlebox or a broker gone wrong); how many connections got it."""
        with self._lock:
            links = list(self._links)
        for link in links:
            with link.lock:
                _forward(link.client, junk)
        return len(links)

    def restore(self) -> None:
        """After `freeze(new=True)`: pass new connections again (the frozen ones stay so)."""
        with self._lock:
            self._hang_new = False

    def server_ports(self) -> list[int]:
        """The local ports of the proxy's connections to the server (for pg_stat_activity)."""
        with self._lock:
            links = list(self._links)
        ports = []
        for link in links:
            with contextlib.suppress(OSError):
                ports.append(int(link.server.getsockname()[1]))
        return ports

    def thaw(self) -> None:
        """Deliver what the frozen connections held back, and let them go on.

        New connections after `freeze(new=True)` still hang until `restore()`.
        """
        with self._lock:
            links = list(self._links)
        for link in links:
            with link.lock:
                link.frozen = False
                for replies in (False, True):
                    for data in link.held[replies]:
                        _forward(link.sink(replies), data)
                    link.held[replies] = []

    def close(self) -> None:
        with self._lock:
            self._closed = True
            links, self._links = self._links, []
            hung, self._hung = self._hung, []
        self._listener.close()
        for sock in [s for link in links for s in (link.client, link.server)] + hung:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._hang_new and not self._closed:
                    self._hung.append(client)  # accepted by the kernel, then silence
                    continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            link = _Link(client, server)
            with self._lock:
                closed = self._closed  # closed while this one connected: close it too
                if not closed:
                    self._links.append(link)
            if closed:
                client.close()
                server.close()
                return
            threading.Thread(target=self._pump, args=(link, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, True), daemon=True).start()

    def _pump(self, link: _Link, replies: bool) -> None:
        source = link.server if replies else link.client
        try:
            while True:
                data = source.recv(65536)
                with link.lock:
                    if link.frozen:
                        link.held[replies].append(data)
                        if not data:
                            return  # the end comes when thawed, if ever
                        continue
                    _forward(link.sink(replies), data)
                if not data:
                    return
        except OSError:
            with contextlib.suppress(OSError):
                link.sink(replies).shutdown(socket.SHUT_WR)


def _forward(sink: socket.socket, data: bytes) -> None:
    """Pass `data` on; b"" passes the end of the stream on."""
    with contextlib.suppress(OSError):
        if data:
            sink.sendall(data)
        else:
            sink.shutdown(socket.SHUT_WR)


def _abort(sock: socket.socket) -> None:
    """Close `sock` with a reset: SO_LINGER 0 makes close() send RST, not FIN.

    A pump thread blocked in recv() holds the socket: close() alone would release it (and
    send the RST) only once that recv returns, which on an idle connection is never, and
    the peer would see a connection that is open and silent. shutdown(SHUT_RD) wakes the
    recv first (it sends nothing).
    """
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()
