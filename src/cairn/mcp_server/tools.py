"""The MCP tools: one per verb of runtime/verbs.py, and the reads and starts beside them.

A verb's tool takes the name, summary and argument schema its `Verb` declares; what MCP
adds per verb is here (`VERB_CALLS`, which tests/test_verbs.py holds to the table). The
tools that read and start runs and answer tasks are in mcp_server/reads.py. Arguments are
checked against the tool's schema before anything is called, so a bad one changes nothing.
"""

from __future__ import annotations

from typing import Any

from cairn.dashboard.api import actions
from cairn.mcp_server import reads
from cairn.mcp_server.tool import MCP, Call, Tool
from cairn.runtime import steering
from cairn.runtime.control import RunControl
from cairn.runtime.verbs import VERBS, Verb


async def _cancel(control: RunControl, args: dict[str, Any]) -> Any:
    return await actions.cancel_run(control, args["run_id"])


async def _pause(control: RunControl, args: dict[str, Any]) -> Any:
    return await actions.pause_run(control, args["run_id"])


async def _resume(control: RunControl, args: dict[str, Any]) -> Any:
    return await actions.resume_run(control, args["run_id"])


async def _retry(control: RunControl, args: dict[str, Any]) -> Any:
    return await actions.retry_run(control, args["run_id"], by=args.get("by", MCP))


async def _restart(control: RunControl, args: dict[str, Any]) -> Any:
    by = args.get("by", MCP)
    handle = await control.restart(args["run_id"], by=by)
    run = await control.record(handle.run_id)
    return {"run_id": run.run_id, "status": run.status, "source": args["run_id"], "by": by}


async def _fork(control: RunControl, args: dict[str, Any]) -> Any:
    by = args.get("by", MCP)
    handle = await steering.fork(control, args["run_id"], args["from_step"], by=by)
    run = await control.record(handle.run_id)
    return {
        "run_id": run.run_id,
        "status": run.status,
        "source": args["run_id"],
        "from_step": args["from_step"],
        "by": by,
    }


async def _send_event(control: RunControl, args: dict[str, Any]) -> Any:
    sent = await control.send_event(
        args["run_id"],
        args["name"],
        args.get("payload"),
        idempotency_key=args.get("idempotency_key"),
    )
    return actions.event_reply(sent)


async def _resume_hook(control: RunControl, args: dict[str, Any]) -> Any:
    run_id = await control.resume_hook(args["token"], args.get("payload"))
    return {"run_id": run_id, "resumed": True}


_STATUS = "Answers the run's status now and the request a worker has yet to act on."
_NEW_RUN = "Answers the new run's id and status; a worker executes it."

VERB_CALLS: dict[str, tuple[Call, str]] = {
    "cancel": (_cancel, _STATUS),
    "pause": (_pause, _STATUS),
    "resume": (_resume, _STATUS),
    "retry": (_retry, "Answers the run's status and its new execution's number."),
    "restart": (_restart, _NEW_RUN),
    "fork": (_fork, _NEW_RUN),
    "send_event": (
        _send_event,
        "Answers whether a wait of the run takes it now (`awaited`); if not, `note` says "
        "what the run waits for (the event is kept for a later wait).",
    ),
    "resume_hook": (_resume_hook, "Answers the id of the run it resumed."),
}
"""How each verb of runtime/verbs.py is called as a tool, and what its answer holds."""


def verb_tool(verb: Verb) -> Tool:
    """The tool of `verb`: its name, summary and arguments as the table declares them."""
    call, answers = VERB_CALLS[verb.name]
    return Tool(verb.name, f"{verb.summary}. {answers}", verb.schema(), call)


TOOLS: tuple[Tool, ...] = (
    *reads.READS,
    *(verb_tool(verb) for verb in VERBS),
)
"""Every tool `cairn mcp` serves, in the order `tools/list` gives them."""

BY_NAME = {tool.name: tool for tool in TOOLS}
