"""The `cairn` entry point: global options, command dispatch, one-line errors, exit codes.

Exit codes: 0 success, 1 a failed action (a cairn error, a bad value, a run that
failed, a verb a finished run cannot take), 2 bad usage (unknown command or option,
missing argument, nothing to do), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cairn import __version__
from cairn.cli import (
    check,
    control,
    dashboard,
    db,
    hooks,
    mcp,
    options,
    output,
    queues,
    runs,
    scaffold,
    schedules,
    tasks,
    worker,
    workflows,
)
from cairn.cli import run as run_command  # `cairn run` (`run` here runs a command line)
from cairn.errors import CairnError
from cairn.store.migrate import SchemaMissing


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one `error: ...` line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Print `error: message` and exit 2."""
        output.error(f"{message} (see `{self.prog} --help`)")
        raise SystemExit(2)


def build_parser() -> Parser:
    """The full `cairn` argument parser."""
    parser = Parser(
        prog="cairn",
        description="cairn: durable workflows in plain Python, on SQLite or PostgreSQL.",
        epilog="Exit codes: 0 success, 1 failed action, 2 bad usage.",
    )
    parser.add_argument("--version", action="version", version=f"cairn {__version__}")
    options.add_global_options(parser)
    common = Parser(add_help=False)
    options.add_global_options(common, suffix="_cmd")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    scaffold.add_parser(commands, common)
    run_command.add_parser(commands, common)
    control.add_commands("", commands, common)
    check.add_parser(commands, common)
    runs.add_parser(commands, common)
    tasks.add_parser(commands, common)
    hooks.add_parser(commands, common)
    workflows.add_parser(commands, common)
    queues.add_parser(commands, common)
    schedules.add_parser(commands, common)
    worker.add_parser(commands, common)
    dashboard.add_parser(commands, common)
    mcp.add_parser(commands, common)
    db.add_parser(commands, common)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse a command line; usage errors exit 2.

    `cairn run` takes its ARGs anywhere after MODULE:WORKFLOW, also after options
    (`cairn run m:wf --run-id r1 42`), which plain argparse refuses.
    """
    parser = build_parser()
    ns, extra = parser.parse_known_args(argv)
    if extra:
        if not getattr(ns, "takes_extra_args", False) or any(_is_option(a) for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        ns.args = [*ns.args, *extra]
    return ns


def _is_option(text: str) -> bool:
    if not text.startswith("-") or text == "-":
        return False
    try:
        float(text)
    except ValueError:
        return True
    return False


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command line and return its exit code (errors already printed)."""
    try:
        ns = parse(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    # psycopg_pool logs each failed connection (three lines for a database that does not
    # exist) before cairn's own one-line error says why it cannot open it.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    try:
        glob = options.resolve_globals(ns)
        code: int = ns.handler(ns, glob)
        return code
    except SchemaMissing as exc:
        output.error(options.refusal(glob.url, exc))
        return 1
    except options.UsageError as exc:
        output.error(str(exc))
        return 2
    except (CairnError, ValueError) as exc:
        output.error(str(exc) or type(exc).__name__)
        return 1
    except KeyboardInterrupt:
        output.error("interrupted")
        return 130


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console entry point: `cairn ...`."""
    code = run(argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into `head` or similar: not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if options.busy_run_threads(wait=0.1):
        # Interpreter exit would join threads stuck in sync steps of runs already handed
        # back; leave now instead (the database is closed, output flushed).
        logging.shutdown()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
