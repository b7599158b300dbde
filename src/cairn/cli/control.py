"""Steering runs from the command line: `cairn runs cancel|pause|...`, `send`, `hooks resume`.

The commands are built from the verbs' declaration (runtime/verbs.py): its command path,
help line and description. Requests are stored by an engine without workers; the worker
that has the run acts on them. A verb exits 0 when the run is or will be in the requested
state, 1 when it cannot.
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cairn.cli import options, output
from cairn.codecs import coded
from cairn.errors import CairnError, HookNotFound
from cairn.models import EventDelivery, RunStatus
from cairn.representation import actions, words
from cairn.runtime import steering
from cairn.runtime.engine import Engine
from cairn.runtime.verbs import VERBS
from cairn.store.records import RunRecord


def _by(parser: argparse.ArgumentParser) -> None:
    # The verbs whose history says who asked: `--by`, else the user running the command.
    parser.add_argument(
        "--by",
        metavar="NAME",
        default=None,
        help="who asks, recorded in the run's history (default: your user name)",
    )


def who(ns: argparse.Namespace) -> str | None:
    """`--by`, else the name of the user running the command (None if it has none)."""
    if ns.by is not None:
        return str(ns.by)
    try:
        return getpass.getuser() or None
    except (KeyError, OSError):  # no user name in this environment (a bare container)
        return None


def _run_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _from_step(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-step",
        metavar="SEQ",
        type=int,
        required=True,
        help="the history entry to run again, and everything after it",
    )


def _event(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", metavar="EVENT", help="the event's name")


def _payload(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "payload",
        metavar="JSON",
        nargs="?",
        help="the payload: JSON when the text parses as JSON, else a string (default: null)",
    )


def _payload_options(parser: argparse.ArgumentParser) -> None:
    # pyworkflow's spellings, beside the positional JSON.
    parser.add_argument(
        "--payload",
        dest="payload_option",
        metavar="JSON",
        help="the payload, as the positional JSON (give one or the other)",
    )
    parser.add_argument(
        "--payload-file",
        metavar="FILE",
        help="read the payload from FILE (- for stdin); its text must be JSON",
    )


def payload_of(ns: argparse.Namespace) -> Any:
    """The payload of the positional JSON, --payload or --payload-file (None if none)."""
    given = [
        name
        for name, value in (
            ("JSON", ns.payload),
            ("--payload", ns.payload_option),
            ("--payload-file", ns.payload_file),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise options.UsageError(f"the payload is given twice ({' and '.join(given)}): give one")
    if ns.payload_file is not None:
        return options.parse_file(ns.payload_file, what="--payload-file")
    text = ns.payload if ns.payload is not None else ns.payload_option
    what = "JSON" if ns.payload is not None else "--payload"
    return None if text is None else options.parse_argument(text, what=what)


def _key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key",
        metavar="IDEMPOTENCY_KEY",
        help="send at most once per key: a repeat with the same key is ignored",
    )


def _token(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("token", metavar="TOKEN", help="the hook's token (hook.token)")


Handler = Callable[[argparse.Namespace, options.Globals], int]


@dataclass(frozen=True, slots=True)
class Command:
    """How `cairn` serves one verb, beyond what its `Verb` declares."""

    handler: Handler
    """Runs the command; returns the exit code."""
    arguments: tuple[Callable[[argparse.ArgumentParser], None], ...]
    """Each adds one argument or option, in the order --help lists them."""
    details: str = ""
    """What --help says after the verb's summary (what it prints, its exit codes)."""


def add_commands(group: str, commands: Any, common: argparse.ArgumentParser) -> None:
    """Register the verbs whose command is `cairn GROUP WORD` ("" for `cairn WORD`).

    The command path, the help line and the start of the description are the `Verb`'s.
    """
    for verb in VERBS:
        *path, word = verb.command.split()
        if " ".join(path) != group:
            continue
        command = COMMANDS[verb.name]
        parser = commands.add_parser(
            word,
            parents=[common],
            help=verb.summary[0].lower() + verb.summary[1:],
            description=" ".join(filter(None, (verb.summary + ".", command.details))),
        )
        for add in command.arguments:
            add(parser)
        parser.set_defaults(handler=command.handler)


def _say(ns: argparse.Namespace, line: str, facts: dict[str, Any]) -> int:
    if ns.json:
        output.print_json(facts)
    else:
        output.say(line)
    return 0


def cancel(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs cancel`."""
    run = options.with_engine(glob, lambda engine: steering.cancel(engine.control, ns.run_id))
    if run.status == RunStatus.CANCELLED:
        line = f"run {run.run_id} CANCELLED"
    else:
        line = (
            f"run {run.run_id}: cancel requested; it is {run.status} and ends CANCELLED at "
            "its current or next durable point, unless it finishes first"
        )
    return _say(ns, line, actions.action_dict(run, "cancel"))


def pause(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs pause`."""
    run = options.with_engine(glob, lambda engine: steering.pause(engine.control, ns.run_id))
    if run.status == RunStatus.PAUSED:
        line = f"run {run.run_id} PAUSED; resume it with `cairn runs resume {run.run_id}`"
    elif run.control == "cancel":
        line = f"run {run.run_id} is not paused: {words.cancel_stands(run.status)}"
    else:
        line = (
            f"run {run.run_id}: pause requested; it is {run.status} and pauses at its next "
            "durable point"
        )
    return _say(ns, line, actions.action_dict(run, "pause"))


def resume(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs resume`."""
    before, run = options.with_engine(
        glob, lambda engine: steering.resume(engine.control, ns.run_id)
    )
    if before.status == RunStatus.PAUSED:
        line = f"run {run.run_id} resumed: {run.status}, for a worker to continue"
    elif before.control == "cancel":
        line = f"run {run.run_id}: nothing to resume: {words.cancel_stands(run.status)}"
    elif before.control == "pause":
        line = f"run {run.run_id}: pause request withdrawn; it is {run.status}"
    else:
        line = f"run {run.run_id} is not paused ({run.status}); nothing to resume"
    return _say(ns, line, actions.action_dict(run, "resume"))


def retry(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs retry`."""

    async def act(engine: Engine) -> tuple[RunRecord, RunRecord, Any]:
        before = await engine.control.record(ns.run_id)
        if before.status != RunStatus.FAILED:
            raise CairnError(
                f"run {ns.run_id!r} is {before.status}, not FAILED; only FAILED runs can "
                "be retried (a new run with the same input: `cairn runs restart`)"
            )
        await engine.retry(ns.run_id, by=by)
        error = coded.shown_error(engine.serializer, before.error) or {}
        return before, await engine.control.record(ns.run_id), error

    by = who(ns)
    _, run, error = options.with_engine(glob, act)
    step = error.get("step") if isinstance(error, dict) else None
    where = f"its failed step {step!r}" if step else "where it failed"
    line = (
        f"run {run.run_id} retried (execution {run.execution}): {run.status}; a worker "
        f"continues it from {where}"
    )
    return _say(
        ns, line, {**actions.action_dict(run, "retry"), "execution": run.execution, "by": by}
    )


def restart(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs restart`: print the new run's id."""

    async def act(engine: Engine) -> RunRecord:
        handle = await engine.restart(ns.run_id, by=by)
        return await engine.control.record(handle.run_id)

    by = who(ns)
    run = options.with_engine(glob, act)
    return _started(ns, run, f"restarts run {ns.run_id} with the same input", {"by": by})


def fork_run(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs fork`: print the new run's id."""
    if ns.from_step < 1:
        raise ValueError(f"--from-step must be a history seq (1 or more), got {ns.from_step}")

    async def act(engine: Engine) -> RunRecord:
        history = await engine.history(ns.run_id)
        seqs = [entry.seq for entry in history]
        if ns.from_step not in seqs:
            span = f"{min(seqs)} to {max(seqs)}" if seqs else "none yet"
            raise CairnError(
                f"run {ns.run_id!r} has no history entry {ns.from_step} (its entries: {span}; "
                f"see `cairn runs show {ns.run_id}`)"
            )
        handle = await engine.fork(ns.run_id, from_step=ns.from_step, by=by)
        return await engine.control.record(handle.run_id)

    by = who(ns)
    run = options.with_engine(glob, act)
    what = f"forks run {ns.run_id}: reuses its history before entry {ns.from_step}"
    return _started(ns, run, what, {"from_step": ns.from_step, "by": by})


def _started(ns: argparse.Namespace, run: RunRecord, what: str, extra: dict[str, Any]) -> int:
    if ns.json:
        output.print_json(
            {"run_id": run.run_id, "status": run.status, "source": ns.run_id, **extra}
        )
        return 0
    output.stderr().print(
        f"run {run.run_id} {what}; {run.status}, for `cairn worker` to execute",
        markup=False,
    )
    print(run.run_id, flush=True)
    return 0


def send_event(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn send`."""
    payload = None if ns.payload is None else options.parse_argument(ns.payload, what="payload")
    if not ns.event:
        raise ValueError("EVENT must not be empty")

    async def act(engine: Engine) -> EventDelivery:
        return await engine.send_event(ns.run_id, ns.event, payload, idempotency_key=ns.key)

    sent = options.with_engine(glob, act)
    facts = {
        "run_id": sent.run_id,
        "event": ns.event,
        "status": sent.status.value,
        "key": ns.key,
        "awaited": sent.awaited,
        "repeated": sent.repeated,
        "waits_for": list(sent.waits_for),
        "note": sent.note,
    }
    line = sent.note or f"event {ns.event!r} sent to run {sent.run_id} ({sent.status.value})"
    if sent.repeated:
        line = (
            f"event {ns.event!r} with key {ns.key!r} was sent to run {sent.run_id} before "
            f"({sent.status.value}{' since' if sent.status.finished else ''}); nothing new sent"
        )
    return _say(ns, line, facts)


def resume_hook(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn hooks resume`."""
    payload = payload_of(ns)

    async def act(engine: Engine) -> str:
        try:
            return await engine.resume_hook(ns.token, payload)
        except HookNotFound:
            # Naming the token gives nothing away: it resumes nothing.
            raise HookNotFound(
                f"hook token {ns.token!r} is unknown, already used or expired"
            ) from None

    run_id = options.with_engine(glob, act)
    if ns.json:
        output.print_json({"run_id": run_id, "resumed": True})
    else:
        output.say(f"hook called: run {run_id} goes on")
    return 0


COMMANDS = {
    "cancel": Command(cancel, (_run_id, _json)),
    "pause": Command(pause, (_run_id, _json)),
    "resume": Command(resume, (_run_id, _json)),
    "retry": Command(retry, (_run_id, _json, _by)),
    "restart": Command(restart, (_run_id, _json, _by), "Prints the new run's id."),
    "fork": Command(
        fork_run,
        (_run_id, _from_step, _json, _by),
        "The entry is --from-step SEQ (see `cairn runs show`); it and the entries after it "
        "run anew. Prints the new run's id.",
    ),
    "send_event": Command(
        send_event,
        (_run_id, _event, _payload, _key, _json),
        "It may be sent before the wait (cairn.wait_for_event or cairn.receive). Only a "
        "wait for EVENT wakes the run: when it waits for something else, a line says so "
        "(the event is kept, the exit code is 0). A worker continues the run.",
    ),
    "resume_hook": Command(
        resume_hook,
        (_token, _payload, _payload_options, _json),
        "This is what the outside system given TOKEN does; a worker then continues the "
        "run. An unknown, used or expired token changes nothing (exit 1).",
    ),
}
