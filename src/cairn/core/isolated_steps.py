"""`@cairn.step(isolation="process")`: each attempt of a sync step in a child process.

A thread cannot be stopped, so a sync step that ignores its timeout holds its next attempt
until it returns (core/attempts.py). A child process can be: at the timeout (or when the
attempt ends otherwise: a cancel, a worker's close) it gets SIGTERM, then SIGKILL after
`TERM_GRACE`, and it is gone before the attempt's failure is recorded. It is made with
the 'spawn' start method (fork in a threaded asyncio process is unsafe), so it is a fresh
interpreter that imports the step's module and finds the function there by name: the
function must be module-level (checked when the step is declared: authoring/step.py), and its
arguments, result and exception are pickled across.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import pickle
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from cairn.errors import InvalidArguments
from cairn.tracebacks import user_traceback

__all__ = ["ChildDied", "ChildTraceback", "call"]

# Seconds between SIGTERM and SIGKILL when a child must stop.
TERM_GRACE = 1.0

_SPAWN = multiprocessing.get_context("spawn")


async def call(where: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a child process; its result, or its exception raised.

    The child is stopped (SIGTERM, then SIGKILL) if this is cancelled: by the attempt's
    timeout, a cancel, or the worker's close.
    """
    receiving, sending = _SPAWN.Pipe(duplex=False)
    child = _SPAWN.Process(
        target=_child,
        args=(sending, fn.__module__, fn.__qualname__, args, kwargs),
        name=f"cairn-{where}",
        daemon=True,
    )
    try:
        child.start()
    except Exception as exc:  # its arguments cannot be pickled, mostly
        receiving.close()
        sending.close()
        raise InvalidArguments(
            f"{where} (isolation='process'): cannot start its process: {_one_line(exc)}"
        ) from exc
    sending.close()  # the child's end: EOF here once the child is gone
    try:
        ok, value, text = await _receive(receiving)
    except EOFError:
        await _stop(child)
        raise ChildDied(f"{where}: its process ended with exit code {child.exitcode}") from None
    finally:
        await _stop(child)
        receiving.close()
    if ok:
        return value
    error = _rebuilt(*value)
    if text:
        error.__cause__ = ChildTraceback(text)
    raise error


class ChildDied(Exception):
    """The process of an isolated step attempt ended without an answer (killed, crashed)."""


class ChildTraceback(Exception):
    """The traceback of the exception a step raised in its process, as text."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0] if self.args else "")


async def _receive(connection: Connection) -> tuple[bool, Any, str]:
    """The child's answer, read once its pipe is readable (EOFError if it died first)."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fd = connection.fileno()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    answer: tuple[bool, Any, str] = pickle.loads(connection.recv_bytes())
    return answer


async def _stop(child: Any) -> None:
    """End `child` if it still runs: SIGTERM, SIGKILL after TERM_GRACE; then reap it."""
    if child.is_alive():
        child.terminate()
        waited = 0.0
        while child.is_alive() and waited < TERM_GRACE:
            await asyncio.sleep(0.02)
            waited += 0.02
        if child.is_alive():
            child.kill()
    child.join()


def _rebuilt(kind: type[BaseException], args: tuple[Any, ...], state: Any) -> BaseException:
    """The child's exception again, its own __init__ not run (it may need other arguments)."""
    try:
        error = kind.__new__(kind)
        error.args = args
        if state:
            error.__dict__.update(state)
    except Exception as exc:  # a class that cannot be made this way
        name = f"{kind.__module__}.{kind.__qualname__}"
        return TypeError(f"the step raised {name} {args!r}, which cannot be rebuilt: {exc}")
    return error


def _child(
    connection: Connection, module: str, qualname: str, args: tuple[Any, ...], kwargs: Any
) -> None:
    """In the child: call the function found by name, send (ok, value, traceback text)."""
    try:
        found = getattr(importlib.import_module(module), qualname)
        fn = getattr(found, "fn", found)  # the module's name is bound to the StepDef
        answer: tuple[bool, Any, str] = (True, fn(*args, **kwargs), "")
    except BaseException as exc:
        state = (type(exc), exc.args, getattr(exc, "__dict__", None))
        answer = (False, state, user_traceback(exc))
    try:
        text = pickle.dumps(answer)
    except Exception as exc:  # a result or exception that does not pickle
        kind = type(answer[1]) if answer[0] else answer[1][0]
        what = "result" if answer[0] else "exception"
        message = (
            f"the step's {what} ({kind.__module__}.{kind.__qualname__}) cannot be sent back "
            f"from its process: {_one_line(exc)}"
        )
        text = pickle.dumps((False, (TypeError, (message,), None), answer[2]))
    try:
        connection.send_bytes(text)
    finally:
        connection.close()


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())
