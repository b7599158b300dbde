"""Operators and encrypted values: the CLI and the dashboard, started with keys or without.

With CAIRN_KEYS they show the values; without, "encrypted (k1)" where each value would
be, never an error page or a traceback. Bad keys stop a command with one line naming the
key at fault. `cairn db rekey` rewrites old values under the current key, and again
finds nothing to do. On both stores.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.dashboard.server import env_without_cairn, run_cli, start_server
from tests.engine.kit import Kit
from tests.engine.seeds import until
from tests.store.kit import execute

import cairn
from cairn.codecs import Encrypted

pytestmark = pytest.mark.process

K1, K2 = b"\x01" * 32, b"\x02" * 32
SECRET = "TOPSECRET-91c2"
RUNS = 2000  # enough for a rekey one value per transaction to be killed mid-way


def keys_env(*pairs: tuple[str, bytes], current: str | None = None) -> dict[str, str]:
    text = ",".join(f"{name}:{base64.b64encode(key).decode()}" for name, key in pairs)
    extra = {"CAIRN_KEYS": text}
    if current:
        extra["CAIRN_CURRENT_KEY"] = current
    return env_without_cairn(**extra)


async def seed(url: str) -> tuple[str, str]:
    """A completed, a failed and a waiting run, every value encrypted under k1."""
    kit = Kit(url)

    @kit.step("ops.shout")
    async def shout(text: str) -> str:
        return f"{text}!"

    @kit.step("ops.refuse")
    async def refuse(text: str) -> None:
        raise cairn.FatalError(f"{text}/refused")

    @kit.workflow("ops.echo")
    async def echo(text: str) -> str:
        await shout(text)  # history entries with an encrypted input and result
        return f"{text}/done"

    @kit.workflow("ops.broken")
    async def broken(text: str) -> None:
        try:
            await refuse(text)  # a failed attempt, a failed step
        except cairn.StepFailed:
            pass
        raise RuntimeError(f"{text}/failed")

    @kit.workflow("ops.ask")
    async def ask(text: str) -> None:
        await cairn.human_task("approve", title="Approve", data={"text": text})

    async with kit.engine(codec=Encrypted({"k1": K1}, "k1")) as engine:
        asked = await engine.start(ask, SECRET, run_id="asked")
        await until(engine, asked.run_id, "WAITING")
        done = await engine.start(echo, SECRET, run_id="done")
        failed = await engine.start(broken, SECRET, run_id="failed")
        await until(engine, done.run_id, "COMPLETED")
        await until(engine, failed.run_id, "FAILED")
    return done.run_id, failed.run_id


def show(tmp_path: Path, url: str, run_id: str, env: dict[str, str]) -> dict[str, object]:
    proc = run_cli(tmp_path, "--db", url, "runs", "show", run_id, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    found: dict[str, object] = json.loads(proc.stdout)["run"]
    return found


async def test_operators__the_cli_decrypts_with_keys_and_names_the_key_without(
    store_url: str, tmp_path: Path
) -> None:
    await seed(store_url)
    with_keys = show(tmp_path, store_url, "done", keys_env(("k1", K1)))
    assert with_keys["args"] == [SECRET] and with_keys["result"] == f"{SECRET}/done"
    without = show(tmp_path, store_url, "done", env_without_cairn())
    assert without["args"] == "encrypted (k1)" and without["result"] == "encrypted (k1)"
    failed = show(tmp_path, store_url, "failed", env_without_cairn())
    assert failed["error"] == {
        "type": "",
        "message": "encrypted (k1)",
        "traceback": "",
        "encrypted": "k1",
    }
    listed = run_cli(tmp_path, "--db", store_url, "runs", "list", env=env_without_cairn())
    assert listed.returncode == 0 and "encrypted (k1)" in listed.stdout, listed.stderr
    plain = run_cli(tmp_path, "--db", store_url, "runs", "show", "failed", env=env_without_cairn())
    assert plain.returncode == 0 and "encrypted (k1)" in plain.stdout, plain.stderr
    assert SECRET not in plain.stdout + listed.stdout


async def test_operators__the_dashboard_decrypts_with_keys_and_names_the_key_without(
    store_url: str, tmp_path: Path
) -> None:
    await seed(store_url)
    for env, shown in (
        (keys_env(("k1", K1)), f"{SECRET}/done"),
        (env_without_cairn(), "encrypted (k1)"),
    ):
        server = start_server(store_url, tmp_path, env=env)
        try:
            async with httpx.AsyncClient(
                base_url=server.url, timeout=10, follow_redirects=True
            ) as web:
                found = (await web.get("/api/v1/runs/done")).json()
                assert found["result"] == shown
                error = (await web.get("/api/v1/runs/failed")).json()["error"]
                assert (SECRET in error["message"]) == (shown != "encrypted (k1)")
                for page in (
                    "/runs/done",
                    "/runs/failed",
                    "/runs/asked",
                    "/",
                    "/tasks",
                    "/api/v1/tasks",
                ):
                    answer = await web.get(page)
                    assert answer.status_code == 200, (page, answer.text[:500])
                    if shown == "encrypted (k1)":
                        assert SECRET not in answer.text, page
                for page in ("/runs/done", "/runs/failed"):
                    assert shown.partition("/")[0] in (await web.get(page)).text, page
        finally:
            server.stop()


async def test_operators__rekey_rewrites_under_the_current_key_and_is_safe_to_rerun(
    store_url: str, tmp_path: Path
) -> None:
    await seed(store_url)
    both = keys_env(("k1", K1), ("k2", K2), current="k2")
    first = run_cli(tmp_path, "--db", store_url, "db", "rekey", "--batch", "1", env=both)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("rewrote ") and "under key 'k2'" in first.stdout
    assert "runs.args 3" in first.stdout and "runs.error 1" in first.stdout
    again = run_cli(tmp_path, "--db", store_url, "db", "rekey", env=both)
    assert again.stdout.startswith("rewrote 0 values"), again.stderr
    shown = show(tmp_path, store_url, "done", keys_env(("k2", K2)))  # k1 no longer needed
    assert shown["result"] == f"{SECRET}/done"
    assert show(tmp_path, store_url, "done", env_without_cairn())["result"] == "encrypted (k2)"


@pytest.mark.parametrize(
    ("keys", "current", "message"),
    [
        (f"k1:{base64.b64encode(b'x' * 16).decode()}", None, "key 'k1' must be 32 bytes, got 16"),
        ("k1:not*base64", None, "key 'k1' is not valid base64"),
        (
            f"k1:{base64.b64encode(K1).decode()}",
            "k9",
            "current key 'k9' is not among the keys (k1)",
        ),
        ("k1", None, "an entry is not KEY_ID:BASE64_KEY"),
    ],
)
def test_operators__bad_keys_are_one_line_naming_the_key(
    sqlite_url: str, tmp_path: Path, keys: str, current: str | None, message: str
) -> None:
    extra = {"CAIRN_KEYS": keys, **({"CAIRN_CURRENT_KEY": current} if current else {})}
    proc = run_cli(tmp_path, "--db", sqlite_url, "runs", "list", env=env_without_cairn(**extra))
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: CAIRN_KEYS: "), proc.stderr
    assert message in lines[0]


def test_operators__rekey_without_keys_says_what_it_needs(sqlite_url: str, tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "--db", sqlite_url, "db", "rekey", env=env_without_cairn())
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "error: cairn db rekey needs the keys: set CAIRN_KEYS or CAIRN_KEYS_FILE "
        "(see docs/howto/encryption.md)"
    )


def test_operators__keygen_prints_a_usable_key(sqlite_url: str, tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "db", "keygen", env=env_without_cairn())
    assert proc.returncode == 0, proc.stderr
    assert len(base64.b64decode(proc.stdout.strip(), validate=True)) == 32
    assert isinstance(cairn.codecs.parse(f"k1:{proc.stdout.strip()}", where="test"), Encrypted)


async def test_operators__rekey_killed_mid_way_leaves_every_value_readable_and_reruns(
    store_url: str, tmp_path: Path
) -> None:
    kit = Kit(store_url)

    @kit.workflow("ops.idle")
    async def idle(text: str) -> None:
        return None

    async with kit.engine(codec=Encrypted({"k1": K1}, "k1"), workers=0) as engine:
        for i in range(RUNS):
            await engine.start(idle, f"{SECRET}-{i}")
    both = keys_env(("k1", K1), ("k2", K2), current="k2")
    command = [sys.executable, "-m", "cairn", "--db", store_url, "db", "rekey", "--batch", "1"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=both, stdout=subprocess.DEVNULL)
    try:
        async with asyncio.timeout(30):
            while heads(store_url).get("aesgcm:k2:", 0) < 1:
                assert proc.poll() is None, "rekey ended before it could be killed"
                await asyncio.sleep(0.001)
    finally:
        proc.kill()  # SIGKILL: no clean-up, a batch may be cut in its transaction
        proc.wait()
    half = heads(store_url)
    assert set(half) == {"aesgcm:k1:", "aesgcm:k2:"} and sum(half.values()) == RUNS, half
    reader = Encrypted({"k1": K1, "k2": K2}, "k2")
    for (text,) in execute(store_url, "SELECT args FROM runs"):
        assert reader.decode(text).startswith('{"args":["' + SECRET)
    again = run_cli(tmp_path, "--db", store_url, "db", "rekey", env=both)
    assert again.returncode == 0, again.stderr
    assert heads(store_url) == {"aesgcm:k2:": RUNS}


def heads(url: str) -> dict[str, int]:
    """How many runs' arguments are under each key."""
    found: dict[str, int] = {}
    for (text,) in execute(url, "SELECT args FROM runs"):
        found[text[:10]] = found.get(text[:10], 0) + 1
    return found
