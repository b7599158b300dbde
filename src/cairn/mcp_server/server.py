"""The MCP server: cairn's tools on the SDK's low-level `Server`, over stdio or HTTP.

Over HTTP the app sits behind the dashboard's own guards, not copies of them
(dashboard/guard.py: the Host names served, no change sent from another site, JSON
bodies; dashboard/auth.py: the bearer token), with the SDK's own DNS-rebinding check
off because the guard does it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from cairn.dashboard import target
from cairn.dashboard.api.replies import UnansweredError
from cairn.dashboard.auth import BearerAuth
from cairn.dashboard.guard import AllowedHosts, Guard
from cairn.mcp_server import tools
from cairn.mcp_server.tool import Tool
from cairn.representation.json_form import dumps
from cairn.runtime.control import RunControl
from cairn.store import write_tally

PATH = "/mcp"
"""Where the streamable HTTP transport answers."""

NAMED = ("this MCP server", "`cairn mcp --allowed-host NAME`")
"""What the guards' refusals call it, and how to serve another host name."""

INSTRUCTIONS = (
    "Tools to read and steer the runs of a cairn workflow engine: list_runs and show_run "
    "say what each run waits for; list_tasks and submit_task answer human tasks; "
    "start_run, cancel, retry, send_event, resume_hook and the others act on runs. "
    "A worker process executes runs; these tools only record requests and answers."
)


def _answer(value: Any) -> types.CallToolResult:
    """A tool's JSON answer: as text, and as structured content when it is an object."""
    text = dumps(value, indent=None)
    structured = json.loads(text)
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=structured if isinstance(structured, dict) else None,
    )


def _error(message: str) -> types.CallToolResult:
    """A tool error: the agent reads `message` and may call again, corrected."""
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


async def call(control: RunControl, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """Call tool `name`; a bad argument or a refusal is a tool error saying why."""
    tool: Tool | None = tools.BY_NAME.get(name)
    if tool is None:
        return _error(f"unknown tool {name!r} (see tools/list)")
    wrong = tool.check(arguments)
    if wrong is not None:
        return _error(wrong)  # checked before any call: nothing changed
    try:
        # A database that does not answer costs a call target.DEADLINE, as a request of
        # the dashboard: the agent hears why instead of waiting for as long as it hangs.
        tally = write_tally.Tally()  # so that the error says whether anything changed
        answer = await target.within(
            target.counted(lambda: tool.call(control, arguments), tally), tally=tally
        )
    except UnansweredError as exc:
        return _error(f"{name}: StoreUnavailable: {exc}")
    except Exception as exc:
        return _error(f"{name}: {type(exc).__name__}: {exc}")
    return _answer(answer)


def build(control: RunControl) -> Server[Any]:
    """An MCP server whose tools act through `control`."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.schema)
                for t in tools.TOOLS
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call(control, params.name, dict(params.arguments or {}))

    return Server(
        "cairn",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(control: RunControl) -> None:
    """Serve the tools over this process's stdin and stdout until stdin closes."""
    server = build(control)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(
    control: RunControl, *, token: str | None, allowed_hosts: Iterable[str] = ()
) -> ASGIApp:
    """The streamable HTTP app at `PATH`, behind the dashboard's guard and token check.

    Without a token it answers anyone who reaches it (bind loopback only); with one, every
    request needs `Authorization: Bearer <token>`. Host names beside localhost and IP
    addresses are served only when in `allowed_hosts`. Run it with its lifespan on.
    """
    if token is not None and not token:
        raise ValueError("the MCP token must not be empty (pass None for no token)")
    allowed = AllowedHosts(allowed_hosts)
    app: ASGIApp = build(control).streamable_http_app(
        streamable_http_path=PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    # Every path is the guards' "API": refusals are JSON, a POST must be JSON.
    if token:
        app = BearerAuth(app, token=token, open_routes=(), api_prefix="", server=NAMED[0])
    return Guard(app, allowed, api_prefix="", named=NAMED)
