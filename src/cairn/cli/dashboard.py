"""`cairn dashboard`: serve the dashboard's web pages and JSON API over HTTP.

It binds 127.0.0.1 unless told otherwise, and refuses any other address without a token:
the API can cancel, retry and start runs. It executes runs only when asked
(`--workers N`): a small deployment then needs one process, not a dashboard and a worker.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from cairn import config
from cairn.cli import options, output
from cairn.errors import ConfigError

NEEDS = ("starlette", "uvicorn", "jinja2")


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn dashboard`."""
    parser = commands.add_parser(
        "dashboard",
        parents=[common],
        help="serve the dashboard (web pages and JSON API) over HTTP",
        description="Serve the dashboard: web pages at / and a JSON API under /api/v1 "
        "(described at /api/v1/openapi.json). It reads and steers runs; `cairn worker` "
        "executes them (or this process, with --workers). Binding an address other than "
        "loopback needs a token.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8080, help="port to bind (8080; 0 picks a free one)"
    )
    parser.add_argument(
        "--token",
        metavar="T",
        default=None,
        help="require `Authorization: Bearer T` on every request but hook calls; the web "
        "pages ask for T once and keep a session cookie (default: CAIRN_DASHBOARD_TOKEN; "
        "the environment keeps it out of `ps`)",
    )
    parser.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[],
        dest="allowed_hosts",
        help="answer to requests for this host name too (repeatable): the name browsers "
        "or a proxy use to reach the dashboard. It always answers to localhost, IP "
        "addresses and --host; `*.example.com` names every subdomain, `*` any name "
        "(unsafe)",
    )
    parser.add_argument(
        "--workers",
        metavar="N",
        type=int,
        default=0,
        help="also execute runs here, N at once, as `cairn worker --concurrency N` would "
        "(needs the workflow modules: -m MODULE); default 0: read and steer only",
    )
    parser.set_defaults(handler=serve)


def loopback(host: str) -> bool:
    """True when every address `host` names is a loopback address."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {info[4][0] for info in found}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses
    )


def served_names(host: str, given: list[str], check: Callable[[str], str]) -> tuple[str, ...]:
    """The --allowed-host names, each checked, and the --host name it binds (if a name)."""
    names = []
    for entry in given:
        try:
            names.append(check(entry))
        except ValueError as exc:
            raise options.UsageError(f"--allowed-host {entry!r} {exc}") from None
    try:
        names.append(check(host))  # the name it was asked to bind is its own
    except ValueError:
        pass  # not a name the Host header can carry: nothing to add
    return tuple(names)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port; ConfigError naming both when that fails."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn dashboard`."""
    if ns.token is not None and not ns.token.strip():
        raise options.UsageError("--token must not be empty")
    token = config.dashboard_token(ns.token)
    if not 0 <= ns.port <= 65535:
        raise options.UsageError(f"--port must be between 0 and 65535, got {ns.port}")
    if ns.workers < 0:
        raise options.UsageError(f"--workers must be 0 or more, got {ns.workers}")
    if ns.workers and not glob.modules:
        raise options.UsageError(
            "--workers needs the workflows it executes: pass -m MODULE (or set "
            "CAIRN_MODULES, or [tool.cairn] modules in pyproject.toml)"
        )
    if token is None and not loopback(ns.host):
        raise options.UsageError(
            f"refusing to bind {ns.host} without a token: anyone who reaches it could start "
            "and cancel runs; pass --token T (or set CAIRN_DASHBOARD_TOKEN), or bind 127.0.0.1"
        )
    for name in NEEDS:
        try:
            __import__(name)
        except ImportError:
            raise ConfigError(
                f"the dashboard needs {name}, which is not installed: pip install "
                "'cairn-workflows[dashboard]'"
            ) from None
    from cairn.dashboard import serve as server
    from cairn.dashboard.guard import check_allowed_host

    allowed_hosts = served_names(ns.host, ns.allowed_hosts, check_allowed_host)

    options.import_modules(glob.modules)
    sock = listen(ns.host, ns.port)
    port = sock.getsockname()[1]
    host = f"[{ns.host}]" if ":" in ns.host else ns.host
    guard = "token required" if token else "no token"
    executes = f"; executing up to {ns.workers} runs at once" if ns.workers else ""

    base = f"http://{host}:{port}"

    def announce() -> None:
        output.stderr().print(
            f"cairn dashboard: {base}/ (API {base}/api/v1; {guard}; database "
            f"{output.database(glob.url)}{executes}); Ctrl-C stops it",
            markup=False,
            highlight=False,
        )

    with sock:
        asyncio.run(
            server.serve(
                glob.url,
                glob.modules,
                sock,
                token=token,
                announce=announce,
                workers=ns.workers,
                allowed_hosts=allowed_hosts,
            )
        )
    return 0
