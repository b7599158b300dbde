"""The dashboard on offloaded values: size, hash and preview; GET .../values/{name} whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from .flows import Flows, start, status
from .server import env_without_cairn

pytestmark = pytest.mark.process

LABEL = "L" * 3000  # over the 1 KiB inline_limit these tests set


async def test_large_values__the_run_page_shows_a_preview_and_the_value_downloads_whole(
    server_factory: Any, flows: Flows, tmp_path: Path
) -> None:
    blobs = (tmp_path / "blobs").as_uri()
    env = env_without_cairn(CAIRN_BLOBS=blobs, CAIRN_INLINE_LIMIT="1KiB")
    server = server_factory(env=env)
    async with (
        flows.engine(blobs=blobs, inline_limit="1KiB"),
        httpx.AsyncClient(base_url=server.api, timeout=10) as api,
    ):
        run_id = await start(api, "t.waiter")
        await status(api, run_id, "WAITING")
        sent = await api.post(f"/runs/{run_id}/events/go", json={"payload": {"label": LABEL}})
        assert sent.status_code < 300, sent.text
        run = await status(api, run_id, "COMPLETED", "FAILED")
        assert run["status"] == "COMPLETED", run["error"]
        shown = run["result"]["offloaded"]
        assert shown["size"] > 3000 and len(shown["sha256"]) == 64
        assert shown["preview"].startswith('{"label":"LLL') and shown["missing"] is False

        whole = await api.get(f"/runs/{run_id}/values/result")
        assert whole.status_code == 200, whole.text
        assert whole.headers["content-type"].startswith("application/json")
        assert json.loads(whole.text) == {"label": LABEL}
        history = (await api.get(f"/runs/{run_id}/history")).json()["history"]
        assert [e["key"] for e in history][-1] == "~event:go#1"
        assert history[-1]["result"]["offloaded"]["sha256"] == shown["sha256"]
        entry = await api.get(f"/runs/{run_id}/values/{history[-1]['key'].replace('#', '%23')}")
        assert json.loads(entry.text) == {"label": LABEL}

        async with httpx.AsyncClient(base_url=server.url, timeout=10) as pages:
            page = await pages.get(f"/runs/{run_id}")
        assert f"/api/v1/runs/{run_id}/values/result" in page.text and "L" * 40 in page.text

        missing = await api.get(f"/runs/{run_id}/values/nope%231")
        assert missing.status_code == 422
        assert "has no history entry 'nope#1'" in missing.json()["message"]
