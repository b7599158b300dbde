"""`cairn runs list` and `cairn runs show`: read-only views of stored runs.

They open the database with an engine that has no workers, so looking never executes.
The verbs that steer a run (`cancel`, `pause`, ...) are registered here from `control`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Group
from rich.text import Text

from cairn.cli import control, facts, options, output, prune
from cairn.models import Execution, RunStatus, parse_origin
from cairn.representation import json_form, words
from cairn.representation import runs as run_forms
from cairn.runtime import run_reading, stored_values
from cairn.store.records import CANCELLED, INTERRUPTED

T = TypeVar("T")

# History entries `cairn runs show` reads by default: the last ones, as the dashboard's run
# page does, so a history of 50,000 entries is not read whole to print one run.
SHOWN = 200
# Where a good --cursor comes from.
CURSOR_HINT = (
    "pass the value the previous page printed (`more runs: add --cursor ...` on stderr, "
    "or `next_cursor` with --json)"
)


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn runs list|show|cancel|pause|resume|retry|restart|fork|prune`."""
    runs = commands.add_parser(
        "runs",
        parents=[common],
        help="list, inspect and steer runs",
        description="Inspect runs, and cancel, pause, resume, retry, restart or fork them.",
    )
    actions = runs.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list runs, newest first",
        description="List runs, newest first, as a table or as JSON.",
    )
    listing.add_argument("--status", metavar="S", help="only runs in this status (e.g. FAILED)")
    listing.add_argument("--workflow", metavar="W", help="only runs of this workflow name")
    listing.add_argument(
        "--version", metavar="V", help="only runs started under this workflow version"
    )
    listing.add_argument(
        "--where",
        metavar="COL=VALUE",
        action="append",
        nargs="+",
        help="only runs whose column COL (set with cairn.set_columns) equals VALUE; VALUE is "
        "JSON when it parses, else a string; repeat to AND several",
    )
    listing.add_argument(
        "--origin",
        metavar="O",
        help="only runs started this way: api, schedule, trigger, parent, continue, restart, "
        "fork, or unknown (runs from before cairn recorded it)",
    )
    listing.add_argument("--prefix", metavar="P", help="only runs whose id starts with P")
    listing.add_argument(
        "--tree",
        metavar="RUN_ID",
        help="only this run and its descendants (child runs, theirs, ... 16 generations "
        "down at most)",
    )
    listing.add_argument(
        "--since",
        metavar="TIME",
        help="only runs created at TIME or later (ISO 8601, local time unless it names a zone)",
    )
    listing.add_argument(
        "--until", metavar="TIME", help="only runs created before TIME (as --since)"
    )
    listing.add_argument("--limit", metavar="N", type=int, default=50, help="at most N runs (50)")
    listing.add_argument("--cursor", metavar="C", help="continue after a previous page")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=list_runs)

    show = actions.add_parser(
        "show",
        parents=[common],
        help="show one run: facts, step history, failed attempts",
        description="Show one run: its facts, its history of steps (with attempts and "
        "errors) and every failed attempt.",
    )
    show.add_argument("run_id", metavar="RUN_ID")
    shown = show.add_mutually_exclusive_group()
    shown.add_argument(
        "--limit",
        metavar="N",
        type=int,
        default=SHOWN,
        help=f"only the last N history entries ({SHOWN})",
    )
    shown.add_argument(
        "--all", action="store_true", help="every history entry, however long the history"
    )
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.add_argument(
        "--traceback",
        action="store_true",
        help="also print a cancelled run's traceback (a failed run's is always printed)",
    )
    show.add_argument(
        "--download",
        metavar="VALUE",
        help="print one stored value whole instead (args, result, or a history entry's key "
        "such as 'produce#1'), an offloaded one fetched from its blob and hash-checked",
    )
    show.add_argument(
        "-o", "--output", metavar="FILE", help="with --download: write it to FILE, not stdout"
    )
    show.set_defaults(handler=show_run)

    control.add_commands("runs", actions, common)
    prune.add_parser(actions, common)


def list_runs(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs list`."""
    status = None if ns.status is None else RunStatus.parse(ns.status)
    where = options.parse_where([item for group in ns.where or () for item in group])
    if ns.limit < 1:
        raise ValueError(f"--limit must be a positive integer, got {ns.limit}")
    origin = None if ns.origin is None else parse_origin(ns.origin)
    since, until = _local_time(ns.since, "--since"), _local_time(ns.until, "--until")
    try:  # checked here to name the option: the engine's words are for Python callers
        run_reading.parse_cursor(ns.cursor)
    except ValueError:
        raise ValueError(f"invalid --cursor {ns.cursor!r}: {CURSOR_HINT}") from None
    page = options.with_engine(
        glob,
        lambda engine: engine.list_runs(
            status=status,
            workflow=ns.workflow,
            columns=where or None,
            since=since,
            limit=ns.limit,
            cursor=ns.cursor,
            version=ns.version,
            until=until,
            origin=origin,
            run_id_prefix=ns.prefix,
            tree=ns.tree,
        ),
    )
    if ns.json:
        output.print_json(
            {"runs": [run_forms.summary_dict(r) for r in page], "next_cursor": page.next_cursor}
        )
        return 0
    console = output.stdout()
    if not page.runs:
        output.say("no runs")
        return 0
    console.print(output.runs_table(page))
    for run in page:
        if run.spinning:  # seen whatever the table's width cuts off
            output.stderr().print(
                f"run {run.run_id} {run.waiting_for}; see `cairn runs show {run.run_id}`",
                markup=False,
                style="red",
            )
    if page.next_cursor is not None:
        output.stderr().print(
            f"more runs: add --cursor {shlex.quote(page.next_cursor)}", markup=False, style="dim"
        )
    return 0


def show_run(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs show`."""
    if ns.limit < 1:
        raise ValueError(f"--limit must be a positive integer, got {ns.limit}")
    if ns.output and not ns.download:
        raise ValueError("--output goes with --download VALUE")
    if ns.download:
        return download(ns, glob)
    window = None if ns.all else ns.limit
    shown = options.with_engine(
        glob, lambda engine: run_forms.fetch(engine.control, ns.run_id, window=window)
    )
    if ns.json:
        document: dict[str, Any] = {
            "run": run_forms.run_dict(shown),
            "history": [run_forms.entry_dict(e) for e in shown.history],
        }
        if shown.skipped:  # only for a history cut short: short ones print as they did
            document["history_skipped"] = shown.skipped
        document["attempts"] = json_form.jsonable(shown.attempts)
        output.print_json(document)
        return 0
    history, attempts, error = shown.history, shown.attempts, shown.error
    parts: list[Any] = [facts_table(shown)]
    if shown.executing:
        parts += [Text(""), Text("executing now", style="bold underline")]
        parts.append(output.executing_table(shown.executing, now=shown.now))
    count = f"last {len(history):,} of {shown.entries:,}" if shown.skipped else f"{len(history)}"
    parts += [Text(""), Text(f"history ({count})", style="bold underline")]
    if shown.skipped:
        parts.append(Text(skipped_note(shown), style="dim"))
    if not history:  # "yet" of a finished run (one that continued as new) misled
        parts.append(Text("no steps" if RunStatus(shown.run.status).finished else "no steps yet"))
    for label, entries in by_execution(shown, history, lambda e: e.execution):
        parts += [Text(label, style="bold")] if label else []
        parts.append(output.history_table(entries))
    if unrecorded := run_forms.unrecorded_recoveries(shown):
        parts.append(Text(words.unrecorded_note(unrecorded), style="yellow"))
    if attempts:
        ended = {a.get("outcome") for a in attempts}
        kinds = ["failed", *([INTERRUPTED] if INTERRUPTED in ended else [])]
        if CANCELLED in ended:  # "cancelled attempts" when no other kind is there
            kinds = [*(kinds if ended - {CANCELLED} else []), CANCELLED]
        named = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} and {kinds[-1]}"
        title = f"{named} attempts ({len(attempts)})"
        parts += [Text(""), Text(title, style="bold underline")]
        for label, tries in by_execution(shown, attempts, lambda a: int(a["execution"])):
            parts += [Text(label, style="bold")] if label else []
            parts.append(output.attempts_table(tries, words.error_line(error)))
    # A cancellation is no fault: its line above says where it stopped (--traceback: how).
    quiet = shown.run.status == RunStatus.CANCELLED and not ns.traceback
    if error and error.get("traceback") and not quiet:
        parts += [Text(""), Text("traceback", style="bold underline")]
        parts.append(facts.Traceback(str(error["traceback"])))
    output.stdout().print(Group(*parts), crop=False)  # an id longer than a line stays whole
    return 0


def download(ns: argparse.Namespace, glob: options.Globals) -> int:
    """`cairn runs show RUN --download VALUE [-o FILE]`: the stored text, whole."""
    text = options.with_engine(
        glob, lambda engine: stored_values.stored_text(engine.control, ns.run_id, ns.download)
    )
    if ns.output:
        try:
            Path(ns.output).write_text(text, encoding="utf-8", errors="surrogatepass")
        except OSError as exc:
            raise ValueError(f"--output {ns.output!r}: cannot write it ({exc.strerror})") from exc
    else:
        sys.stdout.write(text + "\n")
    return 0


def skipped_note(shown: run_forms.Shown) -> str:
    """The line that says how many history entries are left out, and how to see them."""
    return f"the first {shown.skipped:,} are not shown (--all: every entry, --limit N: the last N)"


def by_execution(
    shown: run_forms.Shown, items: list[T], execution: Callable[[T], int]
) -> list[tuple[str, list[T]]]:
    """`items` in groups by execution, each with its label.

    A run that has had only one execution gets one group without a label.
    """
    if len(shown.executions) <= 1:
        return [("", items)] if items else []
    labels = {e.number: words.execution_label(e) for e in shown.executions}
    groups: dict[int, list[T]] = {}
    for item in items:
        groups.setdefault(execution(item), []).append(item)
    return [(labels.get(number, f"execution {number}"), group) for number, group in groups.items()]


def facts_table(shown: run_forms.Shown) -> facts.Facts:
    """The facts of one run, `key  value` a line, long values wrapped under themselves."""
    run, error = shown.run, shown.error
    started = run.started_at
    duration = None if started is None or not run.finished_at else run.finished_at - started
    rows: list[tuple[str, str | Text]] = [
        ("run id", run.run_id),
        ("workflow", run.workflow),
        ("status", output.status_text(run.status)),
    ]
    if run.version is not None:
        rows.append(("version", run.version))
    if shown.waiting is not None:
        rows.append(
            ("waiting for", words.waiting_text(shown.waiting, now=shown.now, run_id=run.run_id))
        )
    if run.control and not RunStatus(run.status).finished:
        rows.append(("requested", f"{run.control} (at its next durable point)"))
    first = shown.executions[0] if shown.executions else None
    if run.execution > 1 and shown.executions:
        rows.append(("execution", words.execution_label(shown.executions[-1], named=False)))
    rows += [
        ("created", words.when(run.created_at)),
        ("started", words.when(started)),
        ("finished", words.when(run.finished_at)),
        ("duration", words.seconds(duration)),
        ("attempt", str(run.attempt)),
        ("recoveries", f"{run.recoveries} of at most {run.max_recoveries}"),
        ("arguments", words.short(shown.args, 200)),
    ]
    queue = None
    if run.queue:
        queue = f"{run.queue} (priority {run.priority})"
    elif run.priority:
        queue = f"none (priority {run.priority})"
    optional: list[tuple[str, Any]] = [
        ("queue", queue),
        ("partition", run.partition_key),
        ("dedup key", run.dedup_key),
        ("parent", run.parent_id),
        ("scheduled at", words.when(run.scheduled_at) if run.scheduled_at else None),
        ("owner", run.owner),
        ("continued from", run.continued_from),
        ("continued to", run.continued_to),
        ("restarted from", _source(run.restarted_from, None, first)),
        ("forked from", _source(run.forked_from, run.forked_from_seq, first)),
        ("restarted as", _copies(shown.copies, "restart")),
        ("forked as", _copies(shown.copies, "fork")),
    ]
    rows += [(k, str(v)) for k, v in optional if v]
    if run.columns:
        rows.append(("columns", words.short(json.loads(run.columns), 200)))
    if run.progress:
        progress = json.loads(run.progress)
        text = words.progress_text(progress, run.status)
        if isinstance(progress, dict) and progress.get("at"):
            text += f" (at {words.when(progress['at'])})"
        rows.append(("progress", text))
    if run.status == RunStatus.COMPLETED:
        rows.append(("result", words.short(shown.result, 200)))
    if error:
        rows.append(("error", Text(words.error_line(error), style="red")))
        if error.get("step"):
            rows.append(("failed step", str(error["step"])))
    return facts.Facts(rows)  # values as Text: never markup


def _source(run_id: str | None, seq: int | None, first: Execution | None) -> str | None:
    """`src-1 at entry 3, by ada at 2026-...`: where a copied run came from, for people."""
    if run_id is None:
        return None
    at = f" at entry {seq}" if seq is not None else ""
    by = f" by {first.by}" if first is not None and first.by else ""
    when = f" at {words.when(first.started_at)}" if first is not None else ""
    return f"{run_id}{at},{by}{when}" if by or when else f"{run_id}{at}"


def _copies(copies: list[dict[str, Any]], how: str) -> str | None:
    found = [c for c in copies if c["how"] == how]
    if not found:
        return None
    return ", ".join(
        c["run_id"] + (f" (from entry {c['from_seq']})" if c["from_seq"] else "") for c in found
    )


def _local_time(text: str | None, option: str) -> datetime | None:
    """An ISO 8601 time given on the command line; local time unless it names a zone."""
    if text is None:
        return None
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{option} must be an ISO 8601 time (2025-06-01 or 2025-06-01T14:30), got {text!r}"
        ) from None
    return found if found.tzinfo is not None else found.astimezone()
