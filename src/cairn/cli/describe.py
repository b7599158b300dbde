"""What to do next about a parked run, in the words of the CLI's own commands.

What the run waits for is `representation.words.waiting_text`, shared with the dashboard.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from cairn import config
from cairn.cli import output
from cairn.store.records import RunRecord


def worker_command(url: str, modules: Iterable[str]) -> str:
    """`cairn worker` with what a worker started from here needs to execute the run.

    `--db` when `url` is not the one a bare `cairn` finds (CAIRN_DATABASE_URL, the files,
    the default); `-m` for each of `modules` that the environment or files do not name.
    A password in the URL is printed as `***`.
    """
    words = ["cairn worker"]
    if url != config.database_url():
        words.append(f"--db {shlex.quote(output.redact(url))}")
    found = set(config.modules())
    words += [f"-m {shlex.quote(m)}" for m in dict.fromkeys(modules) if m not in found]
    return " ".join(words)


def follow_up(run: RunRecord, found: Mapping[str, Any] | None, worker: str = "cairn worker") -> str:
    """The command that moves a parked run on, for the last line of `cairn run`.

    A run waiting on a child is moved on by what moves the child (the nearest one
    whose reason is known, `found["child"]`). `worker` starts a worker able to go on with
    the run (`worker_command`): a step queue's worker needs its modules too, to find the step.
    """
    return _follow_up(run.run_id, found, worker)


def _follow_up(run_id: str, found: Mapping[str, Any] | None, worker: str) -> str:
    kind = None if found is None else found["kind"]
    if kind == "event" and found is not None:
        return f"send it with `cairn send {run_id} {found['name']} JSON`"
    if kind == "task" and found is not None:
        task = found.get("task_id") or "TASK_ID"
        return f"submit it with `cairn tasks submit {task} JSON` (see `cairn tasks show {task}`)"
    if kind == "resume":
        return f"resume it with `cairn runs resume {run_id}`"
    if kind == "hook":
        return (
            "call the hook with `cairn hooks resume TOKEN JSON` "
            f"(`cairn hooks list --run {run_id}` shows its TOKEN)"
        )
    if kind == "step" and found is not None:
        queue = str(found["name"]).rpartition("@")[2]
        return (
            f"a worker serving it runs the step (`{worker} --step-queue {queue}`; "
            "`cairn run --wait` waits for a live one)"
        )
    if kind == "child" and found is not None and found.get("child_id"):
        child = found.get("child") or {}
        waits = child.get("waiting")
        inner = _follow_up(str(child["run_id"]), waits, worker) if waits else ""
        return inner or f"it goes on when its child ends (`cairn runs show {found['child_id']}`)"
    return ""
