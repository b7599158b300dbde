"""`cairn queues list|set`: queue limits in the database, changed while workers run.

Workers apply new limits at their next claim, without a restart.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from cairn.authoring.queues import parse_rate
from cairn.cli import options, output
from cairn.names import check_queue_name
from cairn.representation import queues as queue_forms
from cairn.runtime.queues import QueueInfo


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn queues list|set`."""
    queues = commands.add_parser(
        "queues",
        parents=[common],
        help="list and change queue limits",
        description="Queue limits live in the database; workers apply changes at once.",
    )
    actions = queues.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list queues and their limits",
        description="List every queue with stored limits (declared in code with "
        "cairn.Queue, or set with `cairn queues set`).",
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=list_queues)

    change = actions.add_parser(
        "set",
        parents=[common],
        help="change a queue's limits live",
        description="Change a queue's limits (creating the queue if it has none stored). "
        "Omitted options leave their limit as it is; `none` removes a limit.",
    )
    change.add_argument("name", metavar="NAME")
    for key, text in queue_forms.LIMITS.items():
        flag = "--" + key.replace("_", "-")
        if key == "rate":
            change.add_argument(
                flag, metavar="COUNT/DUR|none", default=argparse.SUPPRESS, help=text
            )
        else:
            change.add_argument(
                flag, metavar="N|none", type=options.limit, default=argparse.SUPPRESS, help=text
            )
    change.add_argument("--json", action="store_true", help="machine-readable output")
    change.set_defaults(handler=set_queue)


def _text(value: Any) -> str:
    return "none" if value is None else str(value)


# heading -> (least width, rank, ample), see output.FittedTable: the queue's name always
# (a long one cut in the middle); its limits whole, in this order, while there is room.
QUEUE_COLUMNS: output.Columns = {
    "QUEUE": (16, 0, 28),
    "CONCURRENCY": (None, 1, None),
    "PER WORKER": (None, 2, None),
    "RATE": (None, 3, None),
    "PER PARTITION": (None, 4, None),
}


def queues_table(infos: list[QueueInfo]) -> output.FittedTable:
    """A table of queues, one line each; `none` is no limit."""
    rows: list[dict[str, str | Text]] = [
        {
            "QUEUE": info.name,
            "CONCURRENCY": _text(info.concurrency),
            "PER WORKER": _text(info.per_worker),
            "RATE": _text(info.rate),
            "PER PARTITION": _text(info.partition_concurrency),
        }
        for info in infos
    ]
    return output.FittedTable(QUEUE_COLUMNS, rows, middle=("QUEUE",))


def describe(info: QueueInfo) -> str:
    """`queue mail: concurrency 2, per worker none, rate 10/60s, per partition none`."""
    return (
        f"queue {info.name}: concurrency {_text(info.concurrency)}, per worker "
        f"{_text(info.per_worker)}, rate {_text(info.rate)}, per partition "
        f"{_text(info.partition_concurrency)}"
    )


def list_queues(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn queues list`."""
    infos = options.with_engine(glob, lambda engine: engine.queues.list())
    if ns.json:
        output.print_json({"queues": [queue_forms.queue_dict(info) for info in infos]})
        return 0
    output.stdout().print(queues_table(infos)) if infos else output.say("no queues")
    return 0


def changes(ns: argparse.Namespace) -> dict[str, Any]:
    """The limits `queues set` was given, checked; UsageError when none, ValueError if bad."""
    found = {key: getattr(ns, key) for key in queue_forms.LIMITS if hasattr(ns, key)}
    if not found:
        flags = ", ".join("--" + key.replace("_", "-") for key in queue_forms.LIMITS)
        raise options.UsageError(f"queues set {ns.name}: nothing to change (give {flags})")
    check_queue_name(ns.name, "queue name")
    for key, value in found.items():
        flag = "--" + key.replace("_", "-")
        if key == "rate":
            if value.strip().lower() == "none":
                found[key] = None
            else:
                parse_rate(value, what=flag)
        elif value is not None and value < 1:
            raise ValueError(f"{flag} must be a positive integer or none, got {value}")
    return found


def set_queue(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn queues set`."""
    limits = changes(ns)
    info = options.with_engine(
        glob, lambda engine: engine.queues.update(ns.name, **limits), creates=True
    )
    if ns.json:
        output.print_json(queue_forms.queue_dict(info))
    else:
        output.say(describe(info))
    return 0
