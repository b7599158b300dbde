"""Fixtures of the step library's tests: real servers, started by the tests themselves.

An HTTP server (http.server in a thread) that answers by script and counts idempotency
keys; a fresh PostgreSQL and MariaDB database per test for the application's tables
(locally skipped when the server is unreachable, a failure with CI=true); an asyncua
OPC UA server on its own thread, once per session.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cairn.steps import db
from conftest import IN_CI, PG_URL, require_postgres
from engine.kit import Kit

MARIADB_URL = os.environ.get("CAIRN_TEST_MARIADB_URL", "mysql://root@127.0.0.1:3306")


@pytest.fixture(autouse=True)
def _close_pools() -> Iterator[None]:
    """Each test's databases are dropped after it: close the pools that reach them."""
    yield
    db.dispose()


@pytest.fixture
def kit(store_url: str) -> Kit:
    """A private registry on a fresh cairn database of each store."""
    return Kit(store_url)


@pytest.fixture
def sqlite_kit(sqlite_url: str) -> Kit:
    """A private registry on a fresh SQLite cairn database (for what no store changes)."""
    return Kit(sqlite_url)


# HTTP


@dataclass
class Answer:
    """What the server answers: status, headers, body."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class Request:
    """What the server was sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class HttpServer:
    """A real HTTP server on 127.0.0.1: each path answers by a script of answers.

    `script(path, *answers)`: the answers given in turn, the last one repeated. Every
    request is kept in `requests` (with its Idempotency-Key).
    """

    def __init__(self) -> None:
        self.scripts: dict[str, list[Answer]] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                answer = server.take(
                    Request(self.command, self.path, dict(self.headers.items()), body)
                )
                self.send_response_only(answer.status)
                if "Date" not in answer.headers:  # a scripted Date replaces the real one
                    self.send_header("Date", self.date_time_string())
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer.body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def script(self, path: str, *answers: Answer) -> str:
        """Answer `path` with `answers` in turn; the URL of `path`."""
        self.scripts[path] = list(answers)
        return self.url + path

    def take(self, request: Request) -> Answer:
        with self._lock:
            self.requests.append(request)
            path = request.path.partition("?")[0]
            script = self.scripts.get(path)
            if not script:
                return Answer(
                    404, {"Content-Type": "text/plain"}, b"no script for " + path.encode()
                )
            return script.pop(0) if len(script) > 1 else script[0]

    def keys(self, path: str) -> list[str | None]:
        """The Idempotency-Key of each request to `path`, in order."""
        return [
            r.headers.get("Idempotency-Key")
            for r in self.requests
            if r.path.partition("?")[0] == path
        ]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    """A fresh scripted HTTP server for one test."""
    server = HttpServer()
    yield server
    server.close()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# Application databases


@pytest.fixture
def sqlite_app(tmp_path: Path) -> str:
    """A SQLite file for the application's tables."""
    return f"sqlite:///{tmp_path / 'app.db'}"


@pytest.fixture
def postgres_app() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for the application's tables."""
    require_postgres()
    import psycopg

    name = f"cairn_app_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield f"{PG_URL.rsplit('/', 1)[0]}/{name}"
    db.dispose()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _mariadb_problem() -> str | None:
    try:
        import pymysql
    except ImportError:
        return "PyMySQL is not installed (pip install pymysql)"
    try:
        pymysql.connect(**_mariadb_params(), connect_timeout=3).close()
    except pymysql.Error as exc:
        return f"MariaDB at {MARIADB_URL} is unreachable: {exc}".splitlines()[0]
    return None


def _mariadb_params() -> dict[str, Any]:
    from sqlalchemy import make_url

    url = make_url(MARIADB_URL)
    return {
        "host": url.host or "127.0.0.1",
        "port": url.port or 3306,
        "user": url.username or "root",
        "password": url.password or "",
    }


_MARIADB_PROBLEM: list[str | None] = []


def require_mariadb() -> None:
    """Skip (locally) or fail (CI=true) when MariaDB cannot be used."""
    if not _MARIADB_PROBLEM:
        _MARIADB_PROBLEM.append(_mariadb_problem())
    problem = _MARIADB_PROBLEM[0]
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true but MariaDB tests cannot run: {problem}", pytrace=False)
    pytest.skip(problem)


@pytest.fixture
def mariadb_app() -> Iterator[str]:
    """A fresh, empty MariaDB database for the application's tables."""
    require_mariadb()
    import pymysql

    name = f"cairn_app_{uuid.uuid4().hex[:12]}"
    connection = pymysql.connect(**_mariadb_params(), autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name}")
    finally:
        connection.close()
    yield f"{MARIADB_URL.rstrip('/')}/{name}"
    db.dispose()
    connection = pymysql.connect(**_mariadb_params(), autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
    finally:
        connection.close()


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def app_url(request: pytest.FixtureRequest) -> str:
    """The same test on an application database of each kind."""
    return str(request.getfixturevalue(f"{request.param}_app"))


# OPC UA


@dataclass
class OpcUaServer:
    """A real asyncua server on 127.0.0.1, running on a thread of its own."""

    url: str
    namespace: int
    loop: asyncio.AbstractEventLoop
    nodes: dict[str, Any]
    kinds: dict[str, Any]

    def run(self, work: Callable[[], Any]) -> Any:
        """Run coroutine function `work` on the server's loop; its result."""
        return asyncio.run_coroutine_threadsafe(work(), self.loop).result(timeout=30)

    def set(self, name: str, value: Any) -> None:
        """Set variable `name` on the server side (as a machine would)."""
        node, kind = self.nodes[name], self.kinds[name]
        self.run(lambda: node.write_value(value, kind))

    def get(self, name: str) -> Any:
        """Read variable `name` on the server side."""
        node = self.nodes[name]
        return self.run(node.read_value)


# The variables the server offers: name -> (initial value, OPC UA type name).
VARIABLES = {
    "Speed": (0, "Int32"),
    "Setpoint": (0.0, "Float"),
    "Command": ("", "String"),
    "Ack": ("", "String"),
    "Running": (False, "Boolean"),
}


@pytest.fixture(scope="session")
def opcua_server() -> Iterator[OpcUaServer]:
    """One asyncua server for the session (it takes seconds to start), on a free port."""
    from asyncua import Server, ua

    ready: Future[OpcUaServer] = Future()
    stop = threading.Event()

    async def serve() -> None:
        server = Server()
        await server.init()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = f"opc.tcp://127.0.0.1:{port}/cairn/"
        server.set_endpoint(url)
        namespace = await server.register_namespace("urn:cairn:test")
        line = await server.nodes.objects.add_object(namespace, "Line1")
        nodes, kinds = {}, {}
        for name, (initial, kind) in VARIABLES.items():
            variant = getattr(ua.VariantType, kind)
            node = await line.add_variable(
                ua.NodeId(f"Line1.{name}", namespace),
                ua.QualifiedName(name, namespace),
                initial,
                varianttype=variant,
            )
            await node.set_writable()
            nodes[name], kinds[name] = node, variant
        async with server:
            ready.set_result(OpcUaServer(url, namespace, asyncio.get_running_loop(), nodes, kinds))
            while not stop.is_set():
                await asyncio.sleep(0.05)

    def main() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:  # surfaced to the fixture
            if not ready.done():
                ready.set_exception(exc)

    thread = threading.Thread(target=main, name="opcua-server", daemon=True)
    thread.start()
    yield ready.result(timeout=60)
    stop.set()
    thread.join(timeout=30)
