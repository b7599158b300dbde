"""`cairn mcp` as a real process: the SDK's client over stdio and over streamable HTTP.

The process serves tools on an engine that executes nothing; the `workers` engine of the
test executes the runs, as `cairn worker` would. Over HTTP the dashboard's checks hold:
a host it does not serve, a change from another site and a missing token are refused.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from tests.conftest import migrated

import cairn

from . import scenarios
from .conftest import approve_through

pytestmark = pytest.mark.process

SRC = Path(cairn.__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
START = 30.0  # seconds for the process to listen; about one on a healthy machine


def _env(**extra: str) -> dict[str, str]:
    """No CAIRN_* setting; cairn's source and the test workflows (module `flows`) on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE)])
    env.update(extra)
    return env


def _command(url: str, *extra: str) -> list[str]:
    migrated(url)  # `cairn mcp` opens only a database that has cairn's schema
    return [sys.executable, "-m", "cairn", "mcp", "--db", url, "-m", "flows", *extra]


async def test_stdio__a_session_answers_a_task_and_sees_the_run_complete(
    store_url: str, workers: cairn.Engine
):
    command, *args = _command(store_url)
    params = StdioServerParameters(command=command, args=args, env=_env())
    async with Client(params) as client:
        await approve_through(client)


@contextmanager
def http_server(url: str, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`cairn mcp --http 127.0.0.1:0` running; yields its endpoint, read from its announcement."""
    proc = subprocess.Popen(
        _command(url, "--http", "127.0.0.1:0", *extra),
        env=env or _env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    found: list[str] = []
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            match = re.search(r"(http://\S+/mcp)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        ready.wait(START)
        assert found, f"cairn mcp did not start: {''.join(lines)}"
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(10)
        assert proc.stderr is not None
        proc.stderr.close()


async def test_http__a_session_answers_a_task_and_sees_the_run_complete(
    store_url: str, workers: cairn.Engine
):
    with http_server(store_url) as endpoint:
        async with Client(endpoint) as client:
            await approve_through(client)


async def test_http__cancel_retry_send_event_resume_hook(
    store_url: str, workers: cairn.Engine, tmp_path: Path
):
    with http_server(store_url) as endpoint:
        async with Client(endpoint) as client:
            await scenarios.cancel_a_sleeping_run(client)
            await scenarios.retry_a_failed_run(client, tmp_path)
            await scenarios.send_an_event(client)
            await scenarios.resume_a_hook(client)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_http__refuses_a_host_it_does_not_serve_and_a_change_from_another_site(
    sqlite_url: str,
):
    with http_server(sqlite_url) as endpoint:
        rebound = httpx.post(endpoint, json=INITIALIZE, headers={**ACCEPT, "Host": "evil.example"})
        assert rebound.status_code == 421, rebound.text
        assert "this MCP server does not answer to the host 'evil.example'" in rebound.text
        assert "cairn mcp --allowed-host NAME" in rebound.text
        foreign = httpx.post(
            endpoint, json=INITIALIZE, headers={**ACCEPT, "Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403, foreign.text
        assert "evil.example" in foreign.json()["message"]
        form = httpx.post(endpoint, content="{}", headers={**ACCEPT, "Content-Type": "text/plain"})
        assert form.status_code == 415, form.text
        own = httpx.post(endpoint, json=INITIALIZE, headers=ACCEPT)
        assert own.status_code == 200, own.text


async def test_http__with_a_token_every_request_needs_it(store_url: str, workers: cairn.Engine):
    with http_server(store_url, env=_env(CAIRN_DASHBOARD_TOKEN="s3cret")) as endpoint:
        bare = httpx.post(endpoint, json=INITIALIZE, headers=ACCEPT)
        assert bare.status_code == 401, bare.text
        assert "this MCP server needs the header Authorization" in bare.text
        wrong = httpx.post(
            endpoint, json=INITIALIZE, headers={**ACCEPT, "Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401, wrong.text
        headers = {"Authorization": "Bearer s3cret"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with Client(streamable_http_client(endpoint, http_client=http)) as client:
                await approve_through(client)


def test_http__refuses_to_bind_beyond_loopback_without_a_token(sqlite_url: str):
    done = subprocess.run(
        [*_command(sqlite_url), "--http", "0.0.0.0:0"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "refusing to bind 0.0.0.0 without a token" in done.stderr


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--http", "8765"], "--http must be HOST:PORT with a port from 0 to 65535"),
        (["--http", "127.0.0.1:99999"], "--http must be HOST:PORT"),
        (["--token", "t"], "--token and --allowed-host need --http HOST:PORT"),
        (["--http", "127.0.0.1:0", "--token", " "], "--token must not be empty"),
        (["--http", "127.0.0.1:0", "--allowed-host", "a.example:80"], "without a port"),
    ],
)
def test_cli__bad_options_exit_2_naming_them(sqlite_url: str, extra: list[str], said: str):
    done = subprocess.run(
        [*_command(sqlite_url), *extra], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
