"""SQLite connections as cairn opens them, the program driver, and what a failure means.

Every connection defines `cairn_now()`, the database's clock: on SQLite that is the
machine's real-time clock (`clock_gettime(CLOCK_REALTIME)`, what SQLite's own
`julianday('now')` reads), shared by every process that can open the file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from itertools import compress, repeat
from operator import is_not
from typing import Any, TypeVar, cast

from cairn.errors import StoreError, StoreRefused, StoreUnavailable
from cairn.store.programs import workers
from cairn.store.programs.base import Program
from cairn.store.records import Beat, WorkerRecord

T = TypeVar("T")


def db_now() -> float:
    """The machine's real-time clock in epoch seconds (not `time.time`, which tests shift)."""
    return time.clock_gettime(time.CLOCK_REALTIME)


def create_private(path: str) -> None:
    """Create the database file readable and writable by its owner only, if it is new.

    Runs' inputs and results are users' data. SQLite gives the -wal and -shm files it
    creates next to the database the database file's mode, so they are private too.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)  # an empty file is an empty database


def _bind_none_directly() -> None:
    """Let sqlite3 bind None without looking for an adapter it never finds.

    sqlite3 binds a None through its adapter lookup, which fails by raising (and
    formatting) an AttributeError it then clears: about 2,000 machine instructions per
    None, and every step's row has one (its `error`). A NoneType adapter that returns its
    None (`{}.get`: a C call) is found at once. It is the process's, as all sqlite3
    adapters are, and changes nothing SQLite stores; one registered before is kept.
    """
    adapters = getattr(sqlite3, "adapters", None)
    if adapters is not None and (type(None), sqlite3.PrepareProtocol) not in adapters:
        sqlite3.register_adapter(type(None), cast("Callable[[None], None]", {}.get))


def connect(path: str, *, busy_ms: int, uri: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode that waits up to `busy_ms` for a lock.

    `uri`: `path` is a SQLite URI ("file:...?vfs=memdb"), not a file name.
    """
    _bind_none_directly()
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0, uri=uri)
    conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    conn.create_function("cairn_now", 0, db_now, deterministic=False)
    return conn


async def open_main(path: str, memory: bool, synchronous: str) -> sqlite3.Connection:
    """A store's own connection, in WAL mode; StoreError naming the file if it cannot open.

    Opening waits for other processes (migrating, switching to WAL) like any start-up;
    once open, the store's loop never waits for a lock (it sets busy_timeout 0 after).
    """
    try:
        if not memory:
            create_private(path)
        conn = connect(path, busy_ms=30_000, uri=memory)
        await switch_to_wal(conn)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: journals of many runs stay hot
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"cannot open database {path!r}: {exc}{read_only_hint(path)}") from exc
    return conn


def connect_for_steps(path: str, synchronous: str) -> sqlite3.Connection:
    """A writer for `@cairn.transaction` steps: it never waits in SQLite (the loop does)."""
    conn = connect(path, busy_ms=0)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread does it
    return conn


def is_busy(exc: BaseException) -> bool:
    """True if `exc` says another connection holds a lock this one needs."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "locked" in text or "busy" in text


# Failures that another try may not meet: locks, a full or failing disk, a file that
# cannot be opened right now. Anything about the values themselves will always fail.
_TRANSIENT = frozenset(
    getattr(sqlite3, name, -1)
    for name in (
        "SQLITE_BUSY",
        "SQLITE_LOCKED",
        "SQLITE_IOERR",
        "SQLITE_FULL",
        "SQLITE_CANTOPEN",
        "SQLITE_PROTOCOL",
        "SQLITE_NOMEM",
    )
)


def is_read_only(exc: BaseException) -> bool:
    """True if `exc` says this connection may not write the database at all.

    SQLITE_READONLY in any of its forms: the file, its folder or its -wal/-shm files are
    not writable by this process (or were when the connection opened). Another try
    cannot change that: the connection would have to be opened again.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError)
        and code is not None
        and (code & 0xFF == sqlite3.SQLITE_READONLY)
    )


def read_only_reason(where: str, exc: BaseException) -> str:
    """The one line that says a database is read-only for this process, and why."""
    return f"database {where} is read-only for this process ({exc})"


def read_only_hint(path: str) -> str:
    """Why a database may not open, when this process cannot write the file or its folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.access(folder, os.W_OK) and (not os.path.exists(path) or os.access(path, os.W_OK)):
        return ""
    return (
        " (the file or its folder is read-only for this process; SQLite writes the file "
        "and, next to it, its -wal and -shm files)"
    )


async def switch_to_wal(conn: sqlite3.Connection, *, within: float = 30.0) -> None:
    """Put the database in WAL mode, waiting while other processes hold it.

    When several processes open a new database at once, SQLite refuses the switch with
    "database is locked" at once, without waiting out its busy timeout, so wait here.
    """
    deadline = time.monotonic() + within
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(0.01)


class Sunk(Exception):
    """A write failed in a way that cannot be undone alone: the whole batch rolls back."""

    def __init__(self, program: Program[Any], error: Exception) -> None:
        super().__init__(str(error))
        self.program = program
        self.error = error


def classify(where: str, exc: BaseException) -> StoreError:
    """The StoreError for a failure of the driver: unavailable, refused, or other.

    Values SQLite will never take (a string or blob too big, a constraint, a string that
    cannot be encoded) are refused; locks and disk trouble are unavailable.
    """
    message = f"database {where}: {exc}"
    error: StoreError
    if is_read_only(exc):
        error = StoreError(read_only_reason(where, exc))
    elif isinstance(exc, sqlite3.OperationalError):
        code = getattr(exc, "sqlite_errorcode", None)
        transient = is_busy(exc) or (code is not None and code & 0xFF in _TRANSIENT)
        error = StoreUnavailable(message) if transient else StoreError(message)
    elif isinstance(exc, sqlite3.DataError | sqlite3.IntegrityError | sqlite3.InterfaceError):
        error = StoreRefused(message)
    elif isinstance(exc, sqlite3.ProgrammingError | UnicodeError | ValueError | OverflowError):
        error = StoreRefused(message)  # a value that cannot be bound or encoded
    else:
        error = StoreError(message)
    error.__cause__ = exc
    return error


# sqlite3 binds a None through a call of its adapter (see `_bind_none_directly`), and a
# new run's row has about twenty: a statement with many parameters says NULL instead
# (with few, the rewrite would cost more than it saves).
_MANY = 20  # parameters: a step's row has 15, a run's 28
_NULLED: dict[tuple[str, tuple[bool, ...]], str] = {}  # by (text, which params are kept)


def without_nones(text: str, params: Sequence[Any]) -> tuple[str, Sequence[Any]]:
    """`text` with each `?` whose parameter is None written NULL, and the other parameters.

    The same statement to SQLite. `text` as it is when its `?` are not plain placeholders
    one for one (a `?` in a literal, `?NNN`): nothing is rewritten then.
    """
    # Scanned by map and compress, in C: a comprehension costs a run's start ~10k instructions.
    kept = tuple(map(is_not, params, repeat(None)))
    nulled = _NULLED.get((text, kept))
    if nulled is None:
        parts = text.split("?")
        nulled = text
        if len(parts) == len(params) + 1 and not any(part[:1].isdigit() for part in parts[1:]):
            marks = ("?" if keep else "NULL" for keep in kept)
            pairs = zip(marks, parts[1:], strict=True)
            nulled = parts[0] + "".join(mark + part for mark, part in pairs)
        if len(_NULLED) < 256:  # a few statements in a few shapes: bounded all the same
            _NULLED[(text, kept)] = nulled
    if nulled is text:
        return text, params
    return nulled, list(compress(params, kept))


def execute(conn: sqlite3.Connection, text: str, params: Sequence[Any]) -> sqlite3.Cursor:
    """One statement of a program, its None parameters written NULL if it has many."""
    if len(params) > _MANY and None in params:
        return conn.execute(*without_nones(text, params))
    return conn.execute(text, params)


def run(conn: sqlite3.Connection, program: Program[T]) -> T:
    """Drive a program with synchronous sqlite3 calls."""
    try:
        statement = next(program)
        while True:
            cursor = execute(conn, statement.text, statement.params)
            if statement.fetch == "count":
                answer: Any = cursor.rowcount
            elif statement.fetch == "one":
                answer = cursor.fetchone()
            else:
                answer = cursor.fetchall()
            statement = program.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def read_again(
    conn: Callable[[], sqlite3.Connection], where: str, make: Callable[[], Program[T]]
) -> T:
    """Ask a read SQLite answered busy (a checkpoint resetting the log) again, for 30 s."""
    delay, started = 0.001, time.monotonic()
    while True:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
        try:
            return run(conn(), make())
        except (sqlite3.Error, UnicodeError, ValueError) as exc:
            if not is_busy(exc) or time.monotonic() - started > 30.0:
                raise classify(where, exc) from exc


AGAIN: Any = object()
"""`commit_lone`'s answer when nothing was done: a fresh program must go the usual way."""


def run_in_savepoint(conn: sqlite3.Connection, program: Program[Any]) -> Any:
    """Run `program` in a savepoint of the open transaction, undone alone if it fails.

    Its outcome, or the exception it failed with. Raises (and so sinks the batch) if
    SQLite had already rolled the whole transaction back.
    """
    conn.execute("SAVEPOINT cairn_write")
    try:
        outcome = run(conn, program)
    except Exception as exc:
        conn.execute("ROLLBACK TO cairn_write")
        outcome = exc
    conn.execute("RELEASE cairn_write")
    return outcome


def commit_lone(conn: sqlite3.Connection, program: Program[Any]) -> Any:
    """Run a write declared `lone` (programs/base.py) as its first statement alone.

    Out of a transaction, SQLite takes the write lock for the statement and commits when
    it ends: what BEGIN IMMEDIATE, the statement and COMMIT do, in one call instead of
    three. Its outcome (a value, or the exception the program or the statement failed
    with), or AGAIN when another connection holds the write lock, the program's first
    statement wants rows, or it changed none and the program asks for more: nothing was
    done, and `program` is closed.
    """
    try:
        statement = next(program)
    except StopIteration as done:
        return done.value
    except Exception as exc:
        return exc
    if statement.fetch != "count":
        program.close()  # rows would hold the statement (and its transaction) open
        return AGAIN
    try:
        count = execute(conn, statement.text, statement.params).rowcount
    except Exception as exc:
        program.close()
        return AGAIN if is_busy(exc) else exc
    try:
        program.send(count)
    except StopIteration as done:
        return done.value
    except Exception as exc:  # LeaseLost and the like
        return exc
    program.close()
    if count == 0:  # nothing written (a new run's id exists): the program goes the usual way
        return AGAIN
    return RuntimeError("cairn: a one-round write asked for a second round")


class SqliteSideChannel:
    """The heartbeat thread's own connection to the file (see Store.side_channel).

    It waits for the write lock in its own thread, so a connection that holds the lock
    for long delays heartbeats but never the event loop.
    """

    def __init__(self, path: str, *, wait: float = 5.0) -> None:
        self.path = path
        self._wait_ms = int(wait * 1000)
        self._conn: sqlite3.Connection | None = None

    def beat(
        self,
        worker: WorkerRecord,
        let_go: Sequence[tuple[str, int]] = (),
        stopped: Callable[[], bool] | None = None,
    ) -> Beat:
        """Heartbeat `worker` and read what it holds (StoreError if the file is locked)."""
        try:
            if self._conn is None:
                self._conn = connect(self.path, busy_ms=self._wait_ms)
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                beat = run(conn, workers.beat_at(worker, let_go, db_now(), stopped))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return beat
        except (sqlite3.Error, ValueError) as exc:
            raise classify(repr(self.path), exc) from exc

    def close(self) -> None:
        """Disconnect."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
