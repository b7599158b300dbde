"""Steering one run: cancel, pause, resume, retry, restart, fork, and sending it an event.

Each verb means what `cairn runs VERB` means: a verb the run can no longer take (cancelling
a COMPLETED run, retrying one that has not failed) is a 409 and changes nothing. A request
a worker acts on later (cancel a RUNNING run) answers at once with `requested` set.
Retry, restart and fork record who asked: the body's `by`, else "api". Their routes are
built from the verbs' declaration in dashboard/api/verb_routes.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from cairn.dashboard.api import inputs
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import NAME, Handler
from cairn.dashboard.api.replies import Reply
from cairn.dashboard.target import Target
from cairn.models import EventDelivery
from cairn.names import check_name
from cairn.representation import actions as answers
from cairn.runtime import steering
from cairn.runtime.control import RunControl

API = "api"  # who asks, when a request does not say (`by`)
BY = {"by": NAME}  # its JSON Schema


async def cancel_run(control: RunControl, run_id: str) -> dict[str, Any]:
    """Cancel; RunFinished (409) for a run that ended otherwise."""
    return answers.action_dict(await steering.cancel(control, run_id), "cancel")


async def pause_run(control: RunControl, run_id: str) -> dict[str, Any]:
    """Pause at the next durable point; RunFinished (409) for a finished run."""
    return answers.action_dict(await steering.pause(control, run_id), "pause")


async def resume_run(control: RunControl, run_id: str) -> dict[str, Any]:
    """Resume a paused run (or withdraw a pause request); RunFinished (409) if finished."""
    _, run = await steering.resume(control, run_id)
    return answers.action_dict(run, "resume")


async def retry_run(control: RunControl, run_id: str, *, by: str = API) -> dict[str, Any]:
    """Continue a FAILED run from its failed step; RunFinished (409) if it is not FAILED."""
    await control.retry(run_id, by=by)
    run = await control.record(run_id)
    return {**answers.action_dict(run, "retry"), "execution": run.execution, "by": by}


Act = Callable[[RunControl, str], Awaitable[dict[str, Any]]]


def who(body: dict[str, Any]) -> str:
    """Who asks for a recorded action: the body's `by` (a name), else "api"."""
    return check_name(inputs.typed(body.get("by", API), str, "by"), "by")


def bodiless(act: Act) -> Handler:
    """The handler of a verb on one run that takes no body (cancel, pause, resume)."""

    async def handle(target: Target, call: Call) -> Reply:
        run_id = call.path("run_id")
        await call.fields(())  # no body, or an empty object
        return Reply(await target(lambda control: act(control, run_id)))

    return handle


async def retry(target: Target, call: Call) -> Reply:
    """`POST /runs/{run_id}/retry`: the next execution of a FAILED run, from its failed step."""
    run_id = call.path("run_id")
    act = partial(retry_run, by=who(await call.fields(("by",))))
    return Reply(await target(lambda control: act(control, run_id)))


async def restart(target: Target, call: Call) -> Reply:
    """`POST /runs/{run_id}/restart`: a new run with the same input (201)."""
    source = call.path("run_id")
    by = who(await call.fields(("by",)))

    async def go(control: RunControl) -> dict[str, Any]:
        handle = await control.restart(source, by=by)
        run = await control.record(handle.run_id)
        return {"run_id": run.run_id, "status": run.status, "source": source, "by": by}

    return Reply(await target(go), 201)


async def fork(target: Target, call: Call) -> Reply:
    """`POST /runs/{run_id}/fork`: a new run reusing the history before `from_step` (201)."""
    source = call.path("run_id")
    body = await call.fields(("from_step", "by"), required=("from_step",))
    from_step = inputs.typed(body["from_step"], int, "from_step")
    by = who(body)

    async def go(control: RunControl) -> dict[str, Any]:
        handle = await steering.fork(control, source, from_step, by=by)
        run = await control.record(handle.run_id)
        return {
            "run_id": run.run_id,
            "status": run.status,
            "source": source,
            "from_step": from_step,
            "by": by,
        }

    return Reply(await target(go), 201)


async def send_event(target: Target, call: Call) -> Reply:
    """`POST /runs/{run_id}/events/{name}`: queue an event for the run (202)."""
    run_id, name = call.path("run_id"), call.path("name")
    body = await call.fields(("payload", "idempotency_key"))
    payload = body.get("payload")
    key = inputs.typed(body.get("idempotency_key"), str, "idempotency_key", null=True)

    async def go(control: RunControl) -> dict[str, Any]:
        sent = await control.send_event(run_id, name, payload, idempotency_key=key)
        return event_reply(sent)

    return Reply(await target(go), 202)


def event_reply(sent: EventDelivery) -> dict[str, Any]:
    """What an event sent to a run did: awaited now, or kept (with `note` saying why)."""
    return {
        "run_id": sent.run_id,
        "event": sent.event,
        "status": sent.status.value,
        "awaited": sent.awaited,
        "repeated": sent.repeated,
        "waits_for": list(sent.waits_for),
        "note": sent.note,
    }
