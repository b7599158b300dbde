"""A TCP proxy to PostgreSQL that loses the server's reply to committed writes.

It forwards both ways, and watches the server's replies for the CommandComplete of a write
(INSERT, UPDATE, DELETE) or of a COMMIT. With probability `rate` it then lets the server
finish (it has the statement and its Sync already), waits a moment, and cuts the
connection without passing the reply on: the write is in the database and the client
never hears so. The connection drop after COMMIT that a flapping network produces.
"""

from __future__ import annotations

import random
import re
import socket
import threading
import time
from collections import Counter

# CommandComplete: 'C', a 4-byte length, then a tag such as "INSERT 0 1" or "COMMIT".
_TAG = re.compile(rb"C\x00\x00\x00.(INSERT|UPDATE|DELETE|COMMIT)\b", re.DOTALL)


class LosingProxy:
    """Listen on a free port and pass connections to `target`, losing some replies."""

    def __init__(self, target: tuple[str, int], *, rate: float, budget: int) -> None:
        self.target = target
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
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _lose(self, data: bytes) -> str | None:
        """The kind of write whose reply to lose in `data`, or None to pass it on."""
        match = _TAG.search(data)
        if match is None:
            return None
        with self._lock:
            if sum(self.lost.values()) >= self.budget or self._random.random() >= self.rate:
                return None
            kind = match.group(1).decode()
            self.lost[kind] += 1
            return kind

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
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
