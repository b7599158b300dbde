"""Another website for the cross-site tests: fixed pages on 127.0.0.1 at a port of its own.

A page there is same-site with a dashboard on 127.0.0.1 (ports do not make sites) but
not same-origin, and its server may set cookies for 127.0.0.1, which every port shares.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Site:
    """Pages by path (`{path: (html, extra headers)}`) and the address they are served at."""

    def __init__(self, pages: dict[str, tuple[str, dict[str, str]]]) -> None:
        self.pages = pages
        self.url = ""


@contextmanager
def attacker_site(pages: dict[str, tuple[str, dict[str, str]]]) -> Iterator[Site]:
    """Serve `pages` on 127.0.0.1 at a free port until the block ends."""
    site = Site(pages)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            html, headers = site.pages.get(self.path, ("not here", {}))
            body = html.encode("utf-8")
            self.send_response(200 if self.path in site.pages else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep the test output clean

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    site.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


async def visit(browser: Any, url: str, *, until_url: str) -> None:
    """Open `url` in a fresh browser context; return once the tab is at `until_url...`."""
    context = await browser.new_context()
    try:
        tab = await context.new_page()
        await tab.goto(url)
        await tab.wait_for_url(re.compile("^" + re.escape(until_url)))
        await tab.wait_for_load_state()
    finally:
        await context.close()


def fetch_page(dashboard: str, calls: list[tuple[str, Any, bool]]) -> str:
    """A page firing no-cors POSTs `(path, JSON body or None, as text/plain)` at `dashboard`.

    Once every call is answered (or refused), the page goes to `#done`.
    """
    script = f"""
const dash = {json.dumps(dashboard)};
const calls = {json.dumps(calls)};
async function go() {{
  for (const [path, body, typed] of calls) {{
    const init = {{method: "POST", mode: "no-cors"}};
    if (body !== null) init.body = JSON.stringify(body);
    if (typed) init.headers = {{"Content-Type": "text/plain"}};
    try {{ await fetch(dash + path, init); }} catch (e) {{ console.log("refused: " + e); }}
  }}
  location.hash = "done";
}}
go();
"""
    return f"<!doctype html><title>cute cats</title><script>{script}</script>"


def form_page(action: str, fields: dict[str, list[str]]) -> str:
    """A page whose form posts `fields` to `action` as soon as it loads."""
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">'
        for name, values in fields.items()
        for value in values
    )
    return (
        f'<!doctype html><form method="post" action="{html.escape(action)}">{inputs}</form>'
        "<script>document.forms[0].submit()</script>"
    )
