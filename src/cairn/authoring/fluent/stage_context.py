"""What a workflow-kind stage receives first: its `ctx`, with the resume guard's data.

A stage that suspends the way the seed's steps do returns a suspension
(`return ctx.screen(...)`): the chain waits for its answer in workflow code, then calls
the stage again with `ctx.resume_data` set to it, so a stage that starts with the resume
guard (`if ctx.resume_data: return ctx.resume_data`) passes the answer on. The answer is
a durable result, recorded once: a replay calls the stage the same way, in the same
order, and gets the same answer, so the stage's calls are as deterministic as its code.

A suspension may also be awaited in the stage (`answer = await ctx.screen(...)`): then it
is cairn's own primitive, and the stage goes on with the answer without a second call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

from cairn.authoring import context, primitives

__all__ = ["StageContext", "Suspension"]


class Suspension:
    """A wait a stage asks for: awaited, its answer; returned, the stage's resumption."""

    def __init__(self, what: str, start: Callable[[], Awaitable[Any]]) -> None:
        self.what = what  # how errors name it: "screen 'review-letter'"
        self._start = start
        self.awaited = False

    def __await__(self) -> Generator[Any, None, Any]:
        """Wait for the answer here, as `cairn.human_task` or `cairn.wait_for_event` do."""
        self.awaited = True
        return self._answer().__await__()

    async def _answer(self) -> Any:
        return await self._start()

    def __repr__(self) -> str:
        """`Suspension(screen 'review-letter')`."""
        return f"Suspension({self.what})"


class StageContext:
    """The `ctx` of a workflow-kind stage (`.then(fn, kind="workflow")`, called `fn(ctx, value)`).

    Attributes:
        resume_data: The answer to the suspension this stage returned on its previous
            call (a screen's submitted values, an event's payload); None on a first call.
        resumed: True when this call follows a suspension the stage returned (also when
            its answer is empty or None, which the guard `if ctx.resume_data` misses).
    """

    def __init__(self, resume_data: Any = None, *, resumed: bool = False) -> None:
        self.resume_data = resume_data
        self.resumed = resumed

    def screen(
        self,
        name: str,
        *,
        title: str,
        data: Any = None,
        form: Any = None,
        assignee: str | None = None,
        timeout: Any = None,
    ) -> Suspension:
        """A human task with its form (see `cairn.human_task`); its answer, the values."""
        return Suspension(
            f"screen {name!r}",
            lambda: primitives.human_task(
                name, title=title, data=data, form=form, assignee=assignee, timeout=timeout
            ),
        )

    def wait_for_event(
        self, name: str, *, timeout: Any = None, default: Any = context.MISSING
    ) -> Suspension:
        """The next event `name` sent to the run (see `cairn.wait_for_event`); its payload."""
        return Suspension(
            f"wait for event {name!r}",
            lambda: primitives.wait_for_event(name, timeout=timeout, default=default),
        )

    def __repr__(self) -> str:
        """`StageContext(resumed=True, resume_data={...})`."""
        return f"StageContext(resumed={self.resumed}, resume_data={self.resume_data!r})"
