"""The traceback stored with a failure: the user's frames, not cairn's.

An exception raised in a workflow or step passes through dozens of cairn's own frames
(the executor, the step runner, the event loop's glue) on its way to where it is caught.
Stored whole, a user's three-line `ValueError` read as sixty lines of cairn. So each
stack (of the exception and of each one chained to it) keeps only the frames outside
cairn's package (its step libraries and examples excepted), asyncio and the thread pools,
unless that would leave none: an error raised by cairn itself in cairn's code keeps its
frames, as a bug report needs them. The same wherever a failure is stored: under `cairn
worker` (core/) and on Lambda (aws/steps.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import traceback

_CAIRN = os.path.dirname(os.path.abspath(__file__)) + os.sep
_OURS = (
    _CAIRN,
    os.path.dirname(asyncio.__file__) + os.sep,
    os.path.dirname(concurrent.futures.__file__) + os.sep,
)
# cairn's step libraries and examples run as the user's code does: their frames stay.
_THEIRS = (_CAIRN + "steps" + os.sep, _CAIRN + "contrib" + os.sep)


def _foreign(frame: traceback.FrameSummary) -> bool:
    name = frame.filename
    return not name.startswith(_OURS) or name.startswith(_THEIRS)


def _trim(summary: traceback.TracebackException, seen: set[int]) -> None:
    if id(summary) in seen:
        return
    seen.add(id(summary))
    kept = [frame for frame in summary.stack if _foreign(frame)]
    if kept:
        summary.stack = traceback.StackSummary.from_list(kept)
    for chained in (summary.__cause__, summary.__context__, *(summary.exceptions or ())):
        if chained is not None:
            _trim(chained, seen)


def user_traceback(exc: BaseException) -> str:
    """`traceback.format_exception(exc)` without cairn's frames (see the module doc)."""
    summary = traceback.TracebackException.from_exception(exc)
    _trim(summary, set())
    return "".join(summary.format())
