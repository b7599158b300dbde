"""`GET /workflows` and `GET /health` in-process, on both stores; a transient start is a 422."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
from tests.chaos.proxy import FreezingProxy

import cairn
from cairn.authoring.workflow import make_workflow
from cairn.clock import SystemClock
from cairn.dashboard import app
from cairn.dashboard.api import health
from cairn.runtime.control import RunControl
from cairn.serialization import JsonSerializer
from cairn.store import migrate
from cairn.store.postgres.store import PostgresStore

from .flows import Flows

UNAVAILABLE = {
    "error": "StoreUnavailable",
    "message": "the database is unavailable for now; try again shortly",
}


def client_on(asgi: Any, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=asgi),
        base_url="http://localhost/api/v1",
        headers=headers,
        timeout=20,
    )


def newest_schema(dialect: str) -> int:
    return max(m.version for m in migrate.available(dialect))


def _transient(flows: Flows) -> None:
    async def quick(n: int) -> int:
        return n

    make_workflow(quick, name="t.quick", durable=False, reg=flows.registry)


async def test_workflows__registered_here_and_by_live_workers(flows: Flows):
    _transient(flows)
    async with flows.engine() as engine, client_on(app(engine)) as api:
        assert engine.worker is not None
        me = engine.worker.env.owner
        response = await api.get("/workflows")
        assert response.status_code == 200, response.text
        listed = response.json()["workflows"]
        by_name = {w["name"]: w for w in listed}
        assert [w["name"] for w in listed] == sorted(flows.registry.workflows)
        assert by_name["t.total"] == {
            "name": "t.total",
            "queue": None,
            "version": None,
            "on": None,
            "durable": True,
            "local": True,
            "workers": [me],
        }
        assert by_name["t.quick"]["durable"] is False
        assert by_name["t.quick"]["workers"] == []
        bad = await api.get("/workflows?status=x")
        assert bad.status_code == 400


async def test_runs__post_of_a_transient_workflow_is_a_422(flows: Flows):
    _transient(flows)
    async with flows.engine() as engine, client_on(app(engine)) as api:
        response = await api.post("/runs", json={"workflow": "t.quick", "args": [1]})
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["error"] == "TransientWorkflow"
        assert body["message"].startswith("workflow 't.quick' is transient (durable=False)")
        assert "POST /api/v1/runs" in body["message"]
        assert list(await engine.list_runs()) == []


async def test_health__ok_with_the_schema_version(flows: Flows):
    async with flows.engine(workers=0) as engine, client_on(app(engine)) as api:
        response = await api.get("/health")
        assert response.status_code == 200
        assert response.json() == {
            "status": "ok",
            "schema_version": newest_schema(engine.store.dialect),
        }
        assert (await api.get("/health?verbose=1")).status_code == 400


async def test_health__needs_no_token_and_is_in_the_openapi_document(flows: Flows):
    async with flows.engine(workers=0) as engine:
        async with client_on(app(engine, token="s3cret")) as api:
            assert (await api.get("/health")).status_code == 200
            assert (await api.get("/workflows")).status_code == 401
            auth = {"Authorization": "Bearer s3cret"}
            doc = (await api.get("/openapi.json", headers=auth)).json()
            assert doc["paths"]["/health"]["get"]["security"] == []
            assert "503" in doc["paths"]["/health"]["get"]["responses"]
            assert "401" in doc["paths"]["/workflows"]["get"]["responses"]


async def test_health__503_once_the_store_is_closed(flows: Flows):
    async with flows.engine(workers=0) as engine:
        async with client_on(app(engine)) as api:
            assert (await api.get("/health")).status_code == 200
            await engine.store.close()
            response = await api.get("/health")
            assert response.status_code == 503
            assert response.json() == UNAVAILABLE


async def test_health__503_for_postgres_on_a_closed_port():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/nowhere")
    control = RunControl(
        store, clock=SystemClock(), serializer=JsonSerializer(), registry=cairn.Registry()
    )
    async with client_on(app(control)) as api:
        response = await api.get("/health")
        assert response.status_code == 503
        assert response.json() == UNAVAILABLE
        assert str(port) not in response.text


class Cutter:
    """A TCP proxy to PostgreSQL whose connections can be cut and refused, then allowed."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.cut = False
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.cut:
                client.close()
                continue
            server = socket.create_connection(self.target)
            with self._lock:
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut_all(self) -> None:
        self.cut = True
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.cut_all()
        self._listener.close()


async def test_health__503_within_its_deadline_when_postgres_goes_away(pg_url: str):
    base, _, database = pg_url.rpartition("/")
    host, _, port = base.rpartition("@")[2].partition(":")
    cutter = Cutter((host, int(port or 5432)))
    try:
        url = f"postgresql://postgres@127.0.0.1:{cutter.port}/{database}"
        async with cairn.Engine(url, workers=0) as engine:
            async with client_on(app(engine)) as api:
                assert (await api.get("/health")).status_code == 200
                cutter.cut_all()
                # The store would retry a lost connection for 30s; the probe answers
                # well inside the client's 20s timeout.
                response = await api.get("/health")
                assert response.status_code == 503
                assert response.json() == UNAVAILABLE
                cutter.cut = False
                assert (await api.get("/health")).status_code == 200
    finally:
        cutter.close()


async def test_health__503_within_its_deadline_when_the_database_freezes(pg_url: str):
    # A frozen database (a hung proxy, a stopped backend) answers nothing and closes
    # nothing: the probe must not wait for the store to give up on the connection.
    base, _, database = pg_url.rpartition("/")
    host, _, port = base.rpartition("@")[2].partition(":")
    proxy = FreezingProxy((host, int(port or 5432)))
    try:
        async with cairn.Engine(proxy.url(database), workers=0) as engine:
            async with client_on(app(engine)) as api:
                assert (await api.get("/health")).status_code == 200
                assert proxy.freeze() > 0
                started = time.monotonic()
                response = await api.get("/health")
                took = time.monotonic() - started
                assert response.status_code == 503
                assert response.json() == UNAVAILABLE
                # The bound the docs give, with room for a busy machine (it took 5.5 s).
                assert took < health.DEADLINE + 1.5, f"answered in {took:.1f}s"
                proxy.thaw()
    finally:
        proxy.close()
