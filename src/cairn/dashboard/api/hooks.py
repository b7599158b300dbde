"""`POST /hooks/{token}`: an outside system calls a hook a run created with cairn.create_hook.

The hook's token is the credential, so this is the one route the dashboard token does not
guard. The body is the payload (any JSON; none is null). An unknown, used or expired
token is a 404, a payload that does not fit the hook's schema a 422 listing the fields;
either changes nothing, and the answer never names the run. The route is built from the
verb's declaration in dashboard/api/verb_routes.py.
"""

from __future__ import annotations

from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.replies import Reply
from cairn.dashboard.target import Target


async def call_hook(target: Target, call: Call) -> Reply:
    """Deliver the payload to the hook's run (202: a worker continues it)."""
    token = call.path("token")
    payload = await call.body()
    await target(lambda control: control.resume_hook(token, payload))
    return Reply({"accepted": True}, 202)
