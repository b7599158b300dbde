"""`cairn schedules list|create|pause|resume|delete|trigger`: schedules in the database.

They open the database with an engine that has no workers: the ticks themselves are fired
by the engines that run workers (`cairn worker`, or an application's Engine).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from cairn import durations
from cairn.authoring.schedule_ticks import describe_seconds
from cairn.cli import options, output
from cairn.errors import ScheduleNotFound, UnknownWorkflow
from cairn.representation import schedules as schedule_forms
from cairn.representation import words
from cairn.runtime.engine import Engine
from cairn.runtime.schedules import ScheduleInfo


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn schedules ...`."""
    schedules = commands.add_parser(
        "schedules",
        parents=[common],
        help="list, create, pause, resume, delete and trigger schedules",
        description="Manage schedules. Engines with workers fire their ticks; each tick "
        "starts exactly one run however many workers run.",
    )
    actions = schedules.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list", parents=[common], help="list schedules", description="List every schedule."
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=list_schedules)

    create = actions.add_parser(
        "create",
        parents=[common],
        help="create a schedule",
        description="Create a schedule that starts WORKFLOW on every tick of --cron or "
        "--every. Its first run is at its next tick.",
    )
    create.add_argument("schedule_id", metavar="ID", help="the schedule's id")
    create.add_argument(
        "workflow",
        metavar="WORKFLOW",
        help="the workflow's name (e.g. reports.nightly), or MODULE:WORKFLOW to import it",
    )
    create.add_argument(
        "args",
        metavar="ARG",
        nargs="*",
        help="positional arguments of each run, read as `cairn run` reads them",
    )
    timing = create.add_mutually_exclusive_group(required=True)
    timing.add_argument("--cron", metavar="EXPR", help='5-field cron, e.g. "0 9 * * 1-5"')
    timing.add_argument("--every", metavar="DUR", help='an interval, e.g. "15m" (at least 1s)')
    create.add_argument("--tz", default="UTC", help="time zone of --cron (UTC)")
    create.add_argument(
        "--overlap",
        default="skip",
        choices=("skip", "buffer_one", "allow", "cancel_other"),
        help="what a tick does while the previous run is active (skip)",
    )
    create.add_argument(
        "--catchup", metavar="DUR", default="1h", help="how far back missed ticks still run (1h)"
    )
    create.add_argument("--input", metavar="JSON", help="JSON object of keyword arguments")
    create.add_argument(
        "--allow-unknown",
        action="store_true",
        help="create it even if no worker seen lately knows the workflow's name",
    )
    create.add_argument("--json", action="store_true", help="machine-readable output")
    create.set_defaults(handler=create_schedule, takes_extra_args=True)

    for name, help_text, handler in (
        ("pause", "stop firing ticks (runs already started go on)", pause),
        ("resume", "fire ticks again, from the next one", resume),
        ("delete", "delete a schedule (its runs are kept)", delete),
        ("trigger", "start one run now and print its id", trigger),
    ):
        action = actions.add_parser(name, parents=[common], help=help_text, description=help_text)
        action.add_argument("schedule_id", metavar="ID")
        action.set_defaults(handler=handler)


def _timing(info: ScheduleInfo) -> str:
    if info.cron is not None:
        return f"cron {info.cron} ({info.tz})"
    assert info.every is not None
    return f"every {describe_seconds(info.every.total_seconds())}"


# The id (what pause, resume, delete and trigger take: whole, on a line of its own if need
# be), workflow and state always show; the next tick first, then the others, join while
# there is room (see output.FittedTable).
SCHEDULE_COLUMNS: output.Columns = {
    "ID": (None, 0, None),
    "WORKFLOW": (16, 0, 32),
    "WHEN": (14, 2, 32),
    "OVERLAP": (None, 4, None),
    "STATE": (None, 0, None),
    "NEXT TICK": (None, 1, None),
    "LAST RUN": (12, 5, 32),
    "SOURCE": (None, 3, None),
}


def schedules_table(infos: list[ScheduleInfo]) -> output.FittedTable:
    """A table of schedules, laid out for the console it is printed on."""
    rows: list[dict[str, str | Text]] = [
        {
            "ID": info.id,
            "WORKFLOW": info.workflow,
            "WHEN": _timing(info),
            "OVERLAP": info.overlap,
            "STATE": "paused" if info.paused else "active",
            "NEXT TICK": "" if info.paused else words.when(info.next_tick),
            "LAST RUN": info.last_run_id or "",
            "SOURCE": info.source,
        }
        for info in infos
    ]
    return output.FittedTable(SCHEDULE_COLUMNS, rows, middle=("WORKFLOW", "LAST RUN"), lead="ID")


def list_schedules(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn schedules list`."""
    infos = options.with_engine(glob, lambda engine: engine.schedules.list())
    if ns.json:
        output.print_json({"schedules": [schedule_forms.schedule_dict(info) for info in infos]})
        return 0
    console = output.stdout()
    console.print(schedules_table(infos) if infos else "no schedules")
    return 0


def create_schedule(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn schedules create`."""
    from cairn.cli import call_args
    from cairn.cli import run as run_command

    for option, value in (("--every", ns.every), ("--catchup", ns.catchup)):
        if value is not None:  # a value that is no duration at all, named as typed
            durations.parse(value, what=option)
    options.import_modules(glob.modules)  # the name may be one these modules register
    workflow = run_command.resolve(ns.workflow, enqueue=True)
    args, kwargs = call_args.parse_call(workflow, ns.args, ns.input, reserved=())

    existed = False

    async def create(engine: Engine) -> ScheduleInfo:
        nonlocal existed
        try:
            await engine.schedules.get(ns.schedule_id)
            existed = True  # the same definition again is no error: it is left as it is
        except ScheduleNotFound:
            pass
        try:
            return await engine.schedules.create(
                ns.schedule_id,
                workflow,
                cron=ns.cron,
                every=ns.every,
                tz=ns.tz,
                overlap=ns.overlap,
                catchup=ns.catchup,
                args=args,
                kwargs=kwargs,
                allow_unknown=ns.allow_unknown,
            )
        except UnknownWorkflow as exc:
            raise exc.told("add --allow-unknown") from None

    info = options.with_engine(glob, create, creates=True)
    if ns.json:
        output.print_json(schedule_forms.schedule_dict(info))
    else:
        done, tick = ("exists already", "next") if existed else ("created", "first")
        output.say(
            f"schedule {info.id} {done}: {_timing(info)}, {tick} tick {words.when(info.next_tick)}"
        )
    return 0


def pause(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn schedules pause`."""
    info = options.with_engine(glob, lambda engine: engine.schedules.pause(ns.schedule_id))
    output.say(f"schedule {info.id} paused")
    return 0


def resume(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn schedules resume`."""
    info = options.with_engine(glob, lambda engine: engine.schedules.resume(ns.schedule_id))
    output.say(f"schedule {info.id} resumed, next tick {words.when(info.next_tick)}")
    return 0


def delete(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn schedules delete`."""
    options.with_engine(glob, lambda engine: engine.schedules.delete(ns.schedule_id))
    output.say(f"schedule {ns.schedule_id} deleted")
    return 0


def trigger(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn schedules trigger`: print the id of the run it started."""

    async def start(engine: Engine) -> str:
        return (await engine.schedules.trigger(ns.schedule_id)).run_id

    output.say(options.with_engine(glob, start))
    return 0
