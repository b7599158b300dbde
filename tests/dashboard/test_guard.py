"""The guard of a tokenless dashboard: the Host names it answers, the calls that change things.

In-process through `cairn.dashboard.app()` and through a real `cairn dashboard`; the
browser's side of the same story is in test_browser.py (`test_attack__...`).
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from cairn.dashboard import app

from .flows import Flows, start, status, until
from .server import run_cli

HOST = "127.0.0.1:8080"  # what the in-process client says it is talking to
OWN = f"http://{HOST}"


@pytest.fixture
def store_url(sqlite_url: str) -> str:
    """SQLite only: the guard decides before any store is asked."""
    return sqlite_url


def client(asgi, base: str = "", **headers: str) -> httpx.AsyncClient:
    """An HTTP client on the app, as if it were served at OWN."""
    transport = httpx.ASGITransport(app=asgi)
    return httpx.AsyncClient(transport=transport, base_url=OWN + base, headers=headers)


async def waiting_run(asgi, run_id: str = "victim") -> None:
    async with client(asgi, "/api/v1") as api:
        await start(api, "t.waiter", run_id=run_id)
        await status(api, run_id, "WAITING")


async def statuses(web: httpx.AsyncClient) -> dict[str, str]:
    runs = (await web.get("/api/v1/runs")).json()["runs"]
    return {run["run_id"]: run["status"] for run in runs}


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io:80", ""],
)
async def test_host__names_it_does_not_serve_are_refused(workers, host):
    async with client(app(workers)) as web:
        api = await web.get("/api/v1/runs", headers={"Host": host})
        assert api.status_code == 421
        assert api.json()["error"] == "MisdirectedRequest"
        assert f"host {host!r}" in api.json()["message"]
        assert "allowed_hosts" in api.json()["message"]
        page = await web.get("/", headers={"Host": host})
        assert page.status_code == 421
        assert page.headers["content-type"].startswith("text/plain")
        assert "content-security-policy" in page.headers
        posted = await web.post(
            "/api/v1/runs", json={"workflow": "t.total"}, headers={"Host": host}
        )
        assert posted.status_code == 421
        assert await statuses(web) == {}


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:8080",
        "LocalHost:1",
        "localhost.",
        "127.0.0.1",
        "127.0.0.1:9999",
        "[::1]:8080",
        "[::1]",
        "10.1.2.3:8080",  # an address cannot be rebound to another server
        "[2001:db8::1]:8080",
    ],
)
async def test_host__loopback_names_and_addresses_are_served(workers, host):
    async with client(app(workers)) as web:
        assert (await web.get("/api/v1/runs", headers={"Host": host})).status_code == 200
        assert (await web.get("/", headers={"Host": host})).status_code == 200


async def test_host__allowed_hosts_adds_names_and_star_allows_any(workers):
    named = app(workers, allowed_hosts=["dash.example", "*.corp.example"])
    async with client(named) as web:
        for host in ("dash.example", "DASH.example:443", "a.corp.example", "b.a.corp.example:8"):
            assert (await web.get("/api/v1/runs", headers={"Host": host})).status_code == 200
        for host in ("corp.example", "evil.example", "dash.example.evil.example"):
            assert (await web.get("/api/v1/runs", headers={"Host": host})).status_code == 421
    async with client(app(workers, allowed_hosts=["*"])) as web:
        assert (await web.get("/api/v1/runs", headers={"Host": "any.example"})).status_code == 200


async def test_host__a_proxys_x_forwarded_host_is_judged_too(workers):
    proxied = {"Host": HOST, "X-Forwarded-Host": "evil.example"}
    async with client(app(workers)) as web:
        refused = await web.get("/api/v1/runs", headers=proxied)
        assert refused.status_code == 421
        assert "'evil.example'" in refused.json()["message"]
    async with client(app(workers, allowed_hosts=["dash.example"])) as web:
        served = {"Host": HOST, "X-Forwarded-Host": "dash.example, internal:8080"}
        assert (await web.get("/api/v1/runs", headers=served)).status_code == 200


async def test_host__mounted_under_a_prefix_it_still_judges(workers):
    from starlette.applications import Starlette
    from starlette.routing import Mount

    outer = Starlette(routes=[Mount("/ops", app=app(workers, allowed_hosts=["dash.example"]))])
    async with client(outer) as web:
        assert (
            await web.get("/ops/api/v1/runs", headers={"Host": "dash.example"})
        ).status_code == 200
        refused = await web.get("/ops/api/v1/runs", headers={"Host": "evil.example"})
        assert refused.status_code == 421
        assert refused.json()["error"] == "MisdirectedRequest"


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("", "must not be empty"),
        ("https://dash.example", "a host name, not a URL"),
        ("dash.example:8443", "without a port"),
        ("dash example", "not a host name"),
        ("*.", "not a host name"),
    ],
)
def test_host__bad_allowed_hosts_are_refused_naming_them(workers, entry, fragment):
    with pytest.raises(ValueError, match=fragment) as caught:
        app(workers, allowed_hosts=[entry])
    assert repr(entry) in str(caught.value)
    with pytest.raises(TypeError, match="a list of host names"):
        app(workers, allowed_hosts="dash.example")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        None,  # a body without a Content-Type
    ],
)
async def test_content_type__api_changes_need_json(workers, content_type):
    dash = app(workers)
    async with client(dash) as web:
        await waiting_run(dash)
        headers = {"Content-Type": content_type} if content_type else {}
        for path, body in (
            ("/api/v1/runs/cancel", b'{"filter": {"status": "WAITING"}}'),
            ("/api/v1/runs/victim/cancel", b"{}"),
            ("/api/v1/runs", b'{"workflow": "t.total", "args": [1, 2], "run_id": "planted"}'),
            ("/api/v1/hooks/some-token", b'{"paid": 1}'),
        ):
            response = await web.post(path, content=body, headers=headers)
            assert response.request.headers.get("Content-Type") == content_type
            assert response.status_code == 415, (path, response.text)
            assert response.json()["error"] == "UnsupportedMediaType"
            assert "Content-Type: application/json" in response.json()["message"]
            assert f"POST {path}" in response.json()["message"]
        assert await statuses(web) == {"victim": "WAITING"}


async def test_content_type__json_variants_and_bodiless_calls_pass(workers):
    dash = app(workers)
    async with client(dash) as web:
        await waiting_run(dash)
        await waiting_run(dash, "second")
        bare = await web.post("/api/v1/runs/victim/cancel")  # curl -X POST: no body, no type
        assert bare.status_code == 200, bare.text
        typed = await web.post(
            "/api/v1/runs/second/pause",
            content=b"",
            headers={"Content-Type": "Application/JSON; charset=utf-8"},
        )
        assert typed.status_code == 200, typed.text
        started = await web.post(
            "/api/v1/runs",
            content=b'{"workflow": "t.total", "args": [1, 2], "run_id": "merged"}',
            headers={"Content-Type": "application/vnd.example+json"},
        )
        assert started.status_code == 201, started.text
        # GETs and the pages' own form posts are not the API's JSON calls.
        assert (await web.get("/api/v1/runs", headers={"Content-Type": "text/plain"})).is_success


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://127.0.0.1:9999"},  # another port: same site, another origin
        {"Origin": "http://localhost:8080"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9999"},
        {"Sec-Fetch-Site": "cross-site", "Origin": OWN},
    ],
)
async def test_origin__browser_calls_from_elsewhere_change_nothing(workers, headers):
    dash = app(workers)
    async with client(dash) as web:
        await waiting_run(dash)
        for method, path in (
            ("POST", "/api/v1/runs/victim/cancel"),
            ("POST", "/api/v1/runs"),
            ("POST", "/api/v1/hooks/some-token"),
            ("PUT", "/api/v1/runs"),
            ("DELETE", "/api/v1/runs/victim"),
        ):
            body = {"workflow": "t.total", "run_id": "planted"}
            response = await web.request(method, path, json=body, headers=headers)
            assert response.status_code == 403, (method, path, response.text)
            answer = response.json()
            assert answer["error"] == "CrossSiteRequest"
            if "Origin" in headers:
                assert repr(headers["Origin"]) in answer["message"]
        form = await web.post(
            "/runs/victim/cancel", data={"confirmed": "yes", "csrf": "x" * 30}, headers=headers
        )
        assert form.status_code == 403
        assert "another site" in form.text
        assert await statuses(web) == {"victim": "WAITING"}


@pytest.mark.parametrize(
    "headers",
    [
        {},  # curl, scripts, other servers
        {"Origin": OWN},
        {"Origin": OWN.upper()},
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "same-origin", "Origin": OWN},
        {"Sec-Fetch-Site": "none"},  # typed by the user, or a bookmark
        # Behind a proxy that rewrites Host, the browser's own verdict counts ...
        {"Sec-Fetch-Site": "same-origin", "Origin": "https://dash.example"},
        # ... and without it, the Host the proxy forwarded.
        {"Origin": "https://dash.example", "X-Forwarded-Host": "dash.example"},
    ],
)
async def test_origin__own_pages_and_non_browsers_are_served(workers, headers):
    dash = app(workers, allowed_hosts=["dash.example"])
    async with client(dash) as web:
        await waiting_run(dash)
        cancelled = await web.post("/api/v1/runs/victim/cancel", headers=headers)
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] in ("CANCELLED", "WAITING")  # WAITING: requested
        assert cancelled.json()["requested"] == "cancel"


async def test_hooks__servers_call_them_browsers_elsewhere_cannot(flows: Flows, workers):
    async with client(app(workers), "/api/v1") as api:
        await start(api, "t.hooked", run_id="hooked")
        await until("a hook token", lambda: _some(flows.tokens))
        token = flows.tokens[0]
        await status(api, "hooked", "WAITING")
        page = await api.post(
            f"/hooks/{token}", json={"paid": 1}, headers={"Origin": "https://evil.example"}
        )
        assert page.status_code == 403
        plain = await api.post(
            f"/hooks/{token}", content=b'{"paid": 1}', headers={"Content-Type": "text/plain"}
        )
        assert plain.status_code == 415
        assert (await api.get("/runs/hooked")).json()["status"] == "WAITING"
        server = await api.post(f"/hooks/{token}", json={"paid": 2})
        assert server.status_code == 202, server.text
        done = await status(api, "hooked", "COMPLETED")
        assert done["result"] == {"paid": 2}


async def test_hooks__with_a_token_set_a_server_still_calls_them(flows: Flows, workers):
    dash = app(workers, token="s3cret")
    async with client(dash, "/api/v1", Authorization="Bearer s3cret") as api:
        await start(api, "t.hooked", run_id="hooked")
        await until("a hook token", lambda: _some(flows.tokens))
        async with client(dash) as outsider:
            called = await outsider.post(f"/api/v1/hooks/{flows.tokens[0]}", json={"paid": 3})
            assert called.status_code == 202, called.text
            foreign = await outsider.get("/api/v1/runs", headers={"Host": "evil.example"})
            assert foreign.status_code == 421  # the host is judged before the token


async def _some(items: list[str]) -> bool:
    return bool(items)


# Through a real `cairn dashboard` process.


@pytest.mark.process
async def test_served__foreign_hosts_refused_allowed_ones_served(server_factory):
    server = server_factory("--allowed-host", "dash.example", "--allowed-host", "*.corp.example")
    port = server.url.rsplit(":", 1)[1]
    async with httpx.AsyncClient(base_url=server.url) as web:
        for host in ("evil.example", f"evil.example:{port}", "corp.example"):
            refused = await web.get("/api/v1/runs", headers={"Host": host})
            assert refused.status_code == 421, host
            assert "--allowed-host" in refused.json()["message"]
            page = await web.get("/", headers={"Host": host})
            assert page.status_code == 421
            assert "--allowed-host" in page.text
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "dash.example", "x.corp.example"):
            assert (await web.get("/api/v1/runs", headers={"Host": host})).status_code == 200
        cross = await web.post(
            "/api/v1/runs",
            content=b'{"workflow": "t.total"}',
            headers={"Content-Type": "text/plain", "Origin": "http://127.0.0.1:1"},
        )
        assert cross.status_code in (403, 415)
        assert (await web.get("/api/v1/runs")).json()["runs"] == []


@pytest.mark.process
async def test_served__the_bound_host_name_is_served(server_factory):
    name = socket.gethostname()
    try:
        loopback = {info[4][0] for info in socket.getaddrinfo(name, None)} <= {"127.0.0.1", "::1"}
    except OSError:
        loopback = False
    if name == "localhost" or not loopback:
        pytest.skip(f"this machine's name {name!r} is not another name for loopback")
    server = server_factory("--host", name)
    assert server.url.startswith(f"http://{name}:")
    async with httpx.AsyncClient(base_url=server.url) as web:  # Host: NAME:PORT
        assert (await web.get("/api/v1/runs")).status_code == 200
        assert (await web.get("/api/v1/runs", headers={"Host": "evil.example"})).status_code == 421


@pytest.mark.process
@pytest.mark.parametrize(
    ("value", "fragment"),
    [("https://dash.example", "a host name, not a URL"), ("", "must not be empty")],
)
def test_served__a_bad_allowed_host_is_one_line_exit_2(tmp_path: Path, sqlite_url, value, fragment):
    done = run_cli(
        tmp_path, "dashboard", "--db", sqlite_url, "--port", "0", "--allowed-host", value
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: --allowed-host ")
    assert fragment in lines[0]
