"""Calling a hook from outside a run: find it by its token, check the payload, deliver it once.

The hooks table keeps only each token's digest; the run's journal keeps the token (a
replay hands the workflow the same one). `list_open(tokens=True)` reads it from there,
for whoever already holds the database (`cairn hooks list`), never for HTTP callers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cairn.authoring import forms
from cairn.core import hook_tokens
from cairn.errors import HookNotFound, InvalidValue
from cairn.runtime import plain_inputs
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import waits
from cairn.store.records import HookRecord

if TYPE_CHECKING:
    from cairn.runtime.control_view import ControlView

_NOT_FOUND = "hook token is unknown, already used or expired"


@dataclass(frozen=True, slots=True)
class HookInfo:
    """A hook that can still be called; its token only when asked for (`list_open(tokens=)`)."""

    run_id: str
    """The run waiting for it."""
    name: str
    """Its name (`cairn.create_hook(name)`)."""
    created_at: datetime
    """When the run created it."""
    expires_at: datetime | None
    """When it stops accepting calls (None: never)."""
    token: str | None = None
    """The token that calls it, read from its run's journal; None unless asked for."""


async def list_open(
    control: ControlView, *, run_id: str | None = None, limit: int = 100, tokens: bool = False
) -> list[HookInfo]:
    """Hooks that can still be called (unused, unexpired, their run unfinished), oldest first.

    With `tokens`, each with the token that calls it (read from its run's journal).

    Raises:
        ValueError: `limit` is not a positive integer.
    """
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidValue(f"limit must be a positive integer, got {limit!r}")
    hooks = await control.store.read(
        waits.list_hooks(now=control.clock.now(), run_id=run_id, limit=limit)
    )
    known = await _tokens(control, {hook.run_id for hook in hooks}) if tokens else {}
    return [
        HookInfo(
            run_id=hook.run_id,
            name=hook.name,
            created_at=datetime.fromtimestamp(hook.created_at, UTC),
            expires_at=(
                None if hook.expires_at is None else datetime.fromtimestamp(hook.expires_at, UTC)
            ),
            token=known.get(hook.token) if tokens else None,
        )
        for hook in hooks
    ]


async def _tokens(control: ControlView, run_ids: set[str]) -> dict[str, str]:
    """Each waiting hook's token of these runs, by the digest the hooks table keeps."""
    found: dict[str, str] = {}
    for run_id in sorted(run_ids):
        for step in await control.store.read(journal_ops.load_journal(run_id)):
            if step.kind != "hook" or step.status != "waiting":
                continue
            facts = json.loads(step.result or "{}")
            token = facts.get("token") if isinstance(facts, dict) else None
            if isinstance(token, str) and token:
                found[hook_tokens.digest(token)] = token
                found[token] = token  # a hook stored before digests: its row holds the token
    return found


async def resume(control: ControlView, token: str, payload: Any) -> str:
    """Call a hook once; returns the run id it resumed.

    The payload is checked against the hook's schema before anything is written, so a
    payload that does not fit changes nothing and the hook can still be called.

    Raises:
        HookNotFound: the token is unknown, already used or expired, or its run has
            finished (nothing changes).
        InvalidSubmission: the payload does not fit the hook's schema (the fields are
            listed; nothing changes).
    """
    hook = await find(control, str(token))
    if hook is None or not hook.usable(control.clock.now()):
        raise HookNotFound(_NOT_FOUND)
    if hook.payload_schema is not None or hook.payload_model is not None:
        payload = forms.validate(
            payload, hook.payload_schema, hook.payload_model, whole="(payload)"
        )
    await plain_inputs.refuse_plain(control, hook.run_id, what="the hook payload")
    text = control.serializer.dumps(payload, what="hook payload")
    # The store checks the row again as it uses it: another call may have won meanwhile.
    run_id = await control.store.write(waits.resume_hook(hook.token, text, now=control.clock.now()))
    if run_id is None:
        raise HookNotFound(_NOT_FOUND)
    control.wake_local()
    return run_id


async def find(control: ControlView, token: str) -> HookRecord | None:
    """The hook a caller's token names: stored as its digest, or as is if created before."""
    hook = await control.store.read(waits.get_hook(hook_tokens.digest(token)))
    if hook is None and hook_tokens.may_be_stored_as_is(token):
        hook = await control.store.read(waits.get_hook(token))
    return hook
