"""`cairn mcp`: serve the operator verbs as MCP tools, over stdio or streamable HTTP.

Over stdio (the default) an MCP client such as Claude Desktop starts the command itself.
Over HTTP it is guarded as `cairn dashboard` is: it binds loopback unless given a token,
answers only the host names it serves, and takes no change sent by another site.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from cairn import config
from cairn.cli import dashboard, options, output
from cairn.errors import ConfigError


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn mcp`."""
    parser = commands.add_parser(
        "mcp",
        parents=[common],
        help="serve the operator verbs as MCP tools for agents (stdio or HTTP)",
        description="Serve the operator verbs as MCP (Model Context Protocol) tools: list "
        "and show runs with what they wait for, start, cancel, retry, send events, list "
        "and answer human tasks, resume hooks. Over stdio by default (an MCP client starts "
        "the command); over streamable HTTP at /mcp with --http. It reads and steers runs; "
        "`cairn worker` executes them. Binding an address other than loopback needs a token.",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        default=None,
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0 picks "
        "a free one)",
    )
    parser.add_argument(
        "--token",
        metavar="T",
        default=None,
        help="with --http, require `Authorization: Bearer T` on every request (default: "
        "CAIRN_DASHBOARD_TOKEN; the environment keeps it out of `ps`)",
    )
    parser.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[],
        dest="allowed_hosts",
        help="with --http, answer to requests for this host name too (repeatable), as "
        "`cairn dashboard --allowed-host` does",
    )
    parser.set_defaults(handler=serve)


def address(text: str) -> tuple[str, int]:
    """HOST and PORT of `--http HOST:PORT` (an IPv6 HOST in brackets); UsageError if bad."""
    host, colon, port = text.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise options.UsageError(
            f"--http must be HOST:PORT with a port from 0 to 65535 (like 127.0.0.1:8765), "
            f"got {text!r}"
        )
    return host, int(port)


def serve(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn mcp`."""
    if ns.token is not None and not ns.token.strip():
        raise options.UsageError("--token must not be empty")
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError(
            "cairn mcp needs the MCP SDK, which is not installed: pip install "
            "'cairn-workflows[mcp]'"
        ) from None
    from cairn.mcp_server import serve as server

    database = output.database(glob.url)
    if ns.http is None:
        if ns.token is not None or ns.allowed_hosts:
            raise options.UsageError("--token and --allowed-host need --http HOST:PORT")
        options.import_modules(glob.modules)

        def ready() -> None:
            output.stderr().print(
                f"cairn mcp: serving on stdio (database {database})", markup=False
            )

        asyncio.run(server.serve(glob.url, glob.modules, announce=ready))
        return 0
    host, port = address(ns.http)
    token = config.dashboard_token(ns.token)
    if token is None and not dashboard.loopback(host):
        raise options.UsageError(
            f"refusing to bind {host} without a token: anyone who reaches it could start "
            "and cancel runs; pass --token T (or set CAIRN_DASHBOARD_TOKEN), or bind 127.0.0.1"
        )
    allowed_hosts = dashboard.served_names(host, ns.allowed_hosts, server.check_allowed_host)
    options.import_modules(glob.modules)
    sock = dashboard.listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}{server.PATH}"
    guard = "token required" if token else "no token"

    def announce() -> None:
        output.stderr().print(
            f"cairn mcp: {url} ({guard}; database {database}); Ctrl-C stops it",
            markup=False,
            highlight=False,
        )

    with sock:
        asyncio.run(
            server.serve(
                glob.url,
                glob.modules,
                sock=sock,
                token=token,
                allowed_hosts=allowed_hosts,
                announce=announce,
            )
        )
    return 0
