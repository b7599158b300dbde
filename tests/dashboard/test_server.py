"""`cairn dashboard` itself: the token rules, the bind rule, the extra, the OpenAPI document."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from .flows import start, status
from .server import env_without_cairn, run_cli, start_server

pytestmark = pytest.mark.process

TOKEN = "s3cret-token-for-tests"

ROUTES = {
    ("GET", "/runs"),
    ("POST", "/runs"),
    ("GET", "/runs/{run_id}"),
    ("GET", "/runs/{run_id}/history"),
    ("GET", "/runs/{run_id}/streams/{name}"),
    ("GET", "/runs/{run_id}/values/{name}"),
    *(("POST", f"/runs/{{run_id}}/{verb}") for verb in ("cancel", "pause", "resume", "retry")),
    ("POST", "/runs/{run_id}/restart"),
    ("POST", "/runs/{run_id}/fork"),
    ("POST", "/runs/{run_id}/events/{name}"),
    ("POST", "/runs/cancel"),
    ("POST", "/runs/retry"),
    ("GET", "/tasks"),
    ("GET", "/tasks/{task_id}"),
    ("POST", "/tasks/{task_id}/submit"),
    ("GET", "/schedules"),
    ("GET", "/schedules/{schedule_id}"),
    *(("POST", f"/schedules/{{schedule_id}}/{verb}") for verb in ("pause", "resume", "trigger")),
    ("GET", "/queues"),
    ("POST", "/queues/{name}"),
    ("GET", "/workers"),
    ("POST", "/hooks/{token}"),
    ("GET", "/workflows"),
    ("GET", "/health"),
    ("GET", "/openapi.json"),
}

UNAUTHORIZED = {
    "error": "Unauthorized",
    "message": "this dashboard needs the header Authorization: Bearer <token>",
}


async def test_token__every_request_but_a_hook_call_needs_it(server_factory, workers):
    server = server_factory("--token", TOKEN)
    assert "token required" in server.stderr()
    await workers.start("t.waiter", run_id="secret-run")
    async with httpx.AsyncClient(base_url=server.api) as anonymous:
        for method, path in (
            ("GET", "/runs"),
            ("GET", "/runs/secret-run"),
            ("POST", "/runs/secret-run/cancel"),
            ("GET", "/openapi.json"),
            ("GET", "/workflows"),
            ("GET", "/no/such/route"),
            ("GET", "/hooks/abc"),
            ("POST", "/hooks/abc/more"),
            ("POST", "/hooks"),
            ("POST", "/runs"),
        ):
            response = await anonymous.request(method, path)
            assert response.status_code == 401, (method, path)
            assert response.json() == UNAUTHORIZED
            assert response.headers["www-authenticate"] == "Bearer"
        for header in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer", f"Basic {TOKEN}"):
            response = await anonymous.get("/runs", headers={"Authorization": header})
            assert response.status_code == 401
            assert response.json() == UNAUTHORIZED
        hook = await anonymous.post("/hooks/not-a-token", json={})
        assert hook.status_code == 404
        assert hook.json()["error"] == "HookNotFound"
        health = await anonymous.get("/health")  # for load balancers, which hold no token
        assert health.status_code == 200
        assert set(health.json()) == {"status", "schema_version"}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.api, headers=headers) as client:
        listed = await client.get("/runs")
        assert listed.status_code == 200
        assert [r["run_id"] for r in listed.json()["runs"]] == ["secret-run"]
        cancelled = await client.post("/runs/secret-run/cancel")
        assert cancelled.status_code == 200
        doc = (await client.get("/openapi.json")).json()
        assert doc["security"] == [{"bearer": []}]
        assert doc["paths"]["/hooks/{token}"]["post"]["security"] == []


async def test_token__from_the_environment(server_factory, store_url):
    server = server_factory(env=env_without_cairn(CAIRN_DASHBOARD_TOKEN=TOKEN))
    async with httpx.AsyncClient(base_url=server.api) as client:
        assert (await client.get("/runs")).status_code == 401
        ok = await client.get("/runs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200


async def test_openapi__lists_every_route_the_api_serves(api):
    response = await api.get("/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.")
    served = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    assert served == ROUTES
    assert "security" not in doc
    submit = doc["paths"]["/tasks/{task_id}/submit"]["post"]
    assert set(submit["responses"]) >= {"200", "400", "403", "404", "415", "421", "422"}
    listing = doc["paths"]["/runs"]["get"]
    assert "421" in listing["responses"] and "415" not in listing["responses"]
    assert submit["requestBody"]["content"]["application/json"]["schema"]["required"] == ["values"]
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_bind__a_public_address_without_a_token_is_refused(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    for host in ("0.0.0.0", "::", "example.invalid"):
        proc = run_cli(tmp_path, "dashboard", "--db", url, "--host", host, "--port", "0")
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"error: refusing to bind {host} without a token")
        assert "--token" in lines[0]
    assert not (tmp_path / "cairn.db").exists()


def test_bind__a_public_address_with_a_token_and_localhost_without_one(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    public = start_server(url, tmp_path, "--host", "0.0.0.0", "--token", TOKEN)
    try:
        assert public.url.startswith("http://0.0.0.0:")
        port = public.url.rsplit(":", 1)[1]
        response = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert response.status_code == 200
    finally:
        assert public.stop() == 0
    local = start_server(url, tmp_path, "--host", "localhost")
    try:
        assert httpx.get(f"{local.api}/runs").status_code == 200
    finally:
        assert local.stop() == 0


def test_cli__empty_token_bad_port_and_a_port_in_use(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    empty = run_cli(tmp_path, "dashboard", "--db", url, "--token", "")
    assert empty.returncode == 2
    assert empty.stderr == "error: --token must not be empty\n"
    bad_port = run_cli(tmp_path, "dashboard", "--db", url, "--port", "70000")
    assert bad_port.returncode == 2
    assert "--port must be between 0 and 65535" in bad_port.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        busy = run_cli(tmp_path, "dashboard", "--db", url, "--port", port)
    assert busy.returncode == 1
    lines = busy.stderr.splitlines()
    assert len(lines) == 1, busy.stderr
    assert lines[0].startswith(f"error: cannot listen on 127.0.0.1:{port}:")


DOUBLING = """
import cairn

@cairn.step()
async def double(n: int) -> int:
    return 2 * n

@cairn.workflow(name="dash.double")
async def doubling(n: int) -> int:
    return await double(n)
"""


async def test_workers__the_dashboard_executes_runs_when_asked(server_factory, tmp_path: Path):
    (tmp_path / "dashflows.py").write_text(DOUBLING)
    server = server_factory("--workers", "2", "-m", "dashflows")
    assert "executing up to 2 runs at once" in server.lines[0]
    async with httpx.AsyncClient(base_url=server.api, timeout=10) as api:
        run_id = await start(api, "dash.double", 21)
        run = await status(api, run_id, "COMPLETED")
    assert run["result"] == 42
    assert server.stop() == 0


def test_workers__needs_the_modules_and_a_count(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    bare = run_cli(tmp_path, "dashboard", "--db", url, "--workers", "2")
    assert bare.returncode == 2
    lines = bare.stderr.splitlines()
    assert len(lines) == 1, bare.stderr
    assert lines[0].startswith("error: --workers needs the workflows it executes: pass -m")
    negative = run_cli(tmp_path, "dashboard", "--db", url, "--workers", "-1")
    assert negative.returncode == 2
    assert negative.stderr == "error: --workers must be 0 or more, got -1\n"


def test_cli__without_the_extra_says_what_to_install(tmp_path: Path):
    blocked = tmp_path / "blocked"
    (blocked / "starlette").mkdir(parents=True)
    (blocked / "starlette" / "__init__.py").write_text("raise ImportError('no starlette')\n")
    env = env_without_cairn()
    env["PYTHONPATH"] = f"{blocked}:{env['PYTHONPATH']}"
    proc = run_cli(tmp_path, "dashboard", "--db", f"sqlite:///{tmp_path / 'x.db'}", env=env)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "pip install 'cairn-workflows[dashboard]'" in lines[0]
    assert lines[0].startswith("error: ")


def test_cli__sigterm_stops_it_cleanly(tmp_path: Path):
    server = start_server(f"sqlite:///{tmp_path / 'cairn.db'}", tmp_path)
    assert httpx.get(f"{server.api}/runs").status_code == 200
    assert server.stop() == 0
    assert not any("Traceback" in line for line in server.lines)


async def test_metrics__served_at_slash_metrics_behind_the_token(server_factory, workers):
    server = server_factory("--token", TOKEN)
    await workers.start("t.waiter", run_id="metered")
    async with httpx.AsyncClient(base_url=server.url) as anonymous:
        refused = await anonymous.get("/metrics")
        assert refused.status_code == 303  # to the login page, like every other page
        assert "cairn_" not in refused.text
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers) as client:
        scraped = await client.get("/metrics")
    assert scraped.status_code == 200
    assert "cairn_workers_live" in scraped.text
    # The gauges count the whole database: the run the test's engine started is there.
    assert 'cairn_runs{queue="",status=' in scraped.text
    assert "metered" not in scraped.text  # no run ids in labels
