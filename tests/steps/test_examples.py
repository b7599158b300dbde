"""The step library's examples run as written, and their how-to pages show them whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Answer, HttpServer, closed_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PAGES = {
    "steps_http.py": "steps-http.md",
    "steps_db.py": "steps-db.md",
    "steps_tags.py": "steps-tags.md",
    "steps_wait.py": "steps-wait.md",
    "transaction.py": "transaction.md",
}

pytestmark = pytest.mark.process


def run_example(name: str, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(("example", "page"), sorted(PAGES.items()))
def test_examples__each_how_to_shows_its_example_whole(example: str, page: str) -> None:
    source = (EXAMPLES / example).read_text(encoding="utf-8")
    shown = (ROOT / "docs" / "howto" / page).read_text(encoding="utf-8")
    assert source.strip() in shown


def test_examples__http(http_server: HttpServer, tmp_path: Path) -> None:
    url = http_server.script("/", Answer(503, {"Retry-After": "0"}), Answer(200, {}, b"hello"))
    out = run_example("steps_http.py", url, cwd=tmp_path)
    assert out.splitlines() == [
        f"{url} answered 200 with 5 bytes",
        "  http.GET: completed after 2 attempt(s)",
    ]


def test_examples__db(tmp_path: Path) -> None:
    run_example("steps_db.py", cwd=tmp_path)
    out = run_example("steps_db.py", cwd=tmp_path)  # a second order for ada
    assert out.splitlines() == [
        "{'id': 1, 'customer': 'ada', 'state': 'new'}",
        "{'id': 2, 'customer': 'ada', 'state': 'new'}",
    ]


def test_examples__transaction(tmp_path: Path) -> None:
    first = run_example("transaction.py", cwd=tmp_path)
    second = run_example("transaction.py", cwd=tmp_path)  # the stock is kept between runs
    steps = ["  stock_up: completed after 1 attempt(s)", "  reserve: completed after 1 attempt(s)"]
    assert first.splitlines() == ["reserved 2 widget: 8 left", *steps]
    assert second.splitlines() == ["reserved 2 widget: 6 left", *steps]


def test_examples__wait(tmp_path: Path) -> None:
    out = run_example("steps_wait.py", cwd=tmp_path)
    lines = out.splitlines()
    assert lines[:2] == ["status while waiting: SLEEPING", "order 7 shipped"]
    assert lines[2].startswith("  wait.until: completed, ")
    assert lines[3] == "  sleep_chunked: completed, 1 attempt(s)"


def test_examples__tags_against_the_plc_simulator(tmp_path: Path) -> None:
    port = closed_port()
    simulator = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "plc_simulator.py"), str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert simulator.stdout is not None
        assert simulator.stdout.readline().startswith("PLC simulator on")  # it listens
        out = run_example("steps_tags.py", f"opcua://127.0.0.1:{port}", cwd=tmp_path)
    finally:
        simulator.terminate()
        simulator.wait(timeout=30)
        if simulator.stdout is not None:
            simulator.stdout.close()
    assert out.splitlines() == ["{'speed': 1200, 'running': True}"]
