"""`cairn hooks list|resume`: hooks runs wait on, and calling one with its token.

A hook's token is its caller's credential. The hooks table keeps only its digest, but
the run's journal keeps the token, and whoever runs `cairn` already holds the database:
`hooks list` shows each token, so an operator can call a hook from the shell. (The HTTP
API never lists tokens.) `resume` takes a token; it is registered with the other verbs
(cli/control.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from cairn.cli import control, options, output
from cairn.representation import json_form, words
from cairn.runtime import hooks
from cairn.runtime.hooks import HookInfo


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn hooks list|resume`."""
    parser = commands.add_parser(
        "hooks",
        parents=[common],
        help="list open hooks, or call one with its token",
        description="Hooks are single-use callbacks runs create (cairn.create_hook) and "
        "wait on; an outside system calls one with its token.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list hooks that can still be called, oldest first",
        description="List the hooks that can still be called (not used, not expired, "
        "their run not finished), oldest first: run id, hook name and the token that "
        "calls it (`cairn hooks resume TOKEN`). Anyone with the database URL can read "
        "the tokens; treat this output as the credential it is.",
    )
    listing.add_argument("--run", metavar="RUN_ID", help="only hooks of this run")
    listing.add_argument(
        "--limit", metavar="N", type=int, default=100, help="at most N hooks (default 100)"
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=list_hooks)

    control.add_commands("hooks", actions, common)


def hook_dict(info: HookInfo) -> dict[str, Any]:
    """The JSON form of an open hook."""
    return {
        "run_id": info.run_id,
        "name": info.name,
        "token": info.token,
        "created_at": json_form.jsonable(info.created_at),
        "expires_at": json_form.jsonable(info.expires_at),
    }


# heading -> (least width, rank, ample), see output.FittedTable: the token whole (to copy
# into `cairn hooks resume`) and the hook's name always; its run, then its expiry, join
# while there is room.
HOOK_COLUMNS: output.Columns = {
    "TOKEN": (None, 0, None),
    "HOOK": (12, 0, 24),
    "RUN ID": (12, 1, 32),
    "EXPIRES": (None, 2, None),
}


def hooks_table(infos: list[HookInfo]) -> output.FittedTable:
    """A table of open hooks, one line each, fitted to the console it is printed on."""
    rows: list[dict[str, str | Text]] = [
        {
            "TOKEN": info.token or "?",
            "HOOK": info.name,
            "RUN ID": info.run_id,
            "EXPIRES": words.when(info.expires_at) if info.expires_at is not None else "never",
        }
        for info in infos
    ]
    return output.FittedTable(HOOK_COLUMNS, rows, middle=("HOOK", "RUN ID"))


def list_hooks(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn hooks list`."""
    if ns.limit < 1:
        raise ValueError(f"--limit must be a positive integer, got {ns.limit}")
    infos = options.with_engine(
        glob,
        lambda engine: hooks.list_open(engine.control, run_id=ns.run, limit=ns.limit, tokens=True),
    )
    if ns.json:
        output.print_json({"hooks": [hook_dict(info) for info in infos]})
        return 0
    if not infos:
        where = f" of run {ns.run}" if ns.run else ""
        output.say(f"no open hooks{where}")
        return 0
    output.stdout().print(hooks_table(infos))
    return 0
