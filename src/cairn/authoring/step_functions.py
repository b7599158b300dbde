"""`@step.do` functions of a Cloudflare-style workflow: awaiting one runs it as a step.

A step function's parameters named after earlier step functions receive their results
(run first if they have not run), as Cloudflare's Python Workflows do.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Protocol

from cairn.authoring import primitives
from cairn.authoring.retry import Retry
from cairn.authoring.step import run_step


class Owner(Protocol):
    """The `WorkflowStep` whose step functions these are: their results so far."""

    _functions: dict[str, StepFunction]
    _results: dict[StepFunction, Any]
    _resolving: dict[StepFunction, asyncio.Future[Any]]


class StepFunction:
    """A function declared with `@step.do`: awaiting a call runs it as a durable step."""

    def __init__(
        self,
        owner: Owner,
        name: str,
        fn: Callable[..., Any],
        retry: Retry | None,
        timeout: Any,
        concurrent: bool,
        depends: list[Any],
    ) -> None:
        self.owner = owner
        self.name = name
        self.fn = fn
        self.retry = retry
        self.timeout = timeout
        self.concurrent = concurrent
        self.depends = depends
        self.parameters = inspect.signature(fn).parameters
        self.__name__ = getattr(fn, "__name__", name)
        self.__doc__ = getattr(fn, "__doc__", None)
        # The step functions declared before this one, by name: only those can be named by
        # its parameters, so dependencies never form a cycle.
        self.earlier = dict(owner._functions)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the step (its dependencies first); its result, recorded."""
        given = list(args)
        if self.depends:
            given = [*(await self._results_of(self.depends)), *given]
        wanted = self._wanted(len(given), kwargs)
        found = await self._results_of([self.earlier[dep] for dep in wanted])
        kwargs = {**kwargs, **dict(zip(wanted, found, strict=True))}
        fn, wants_ctx = self.fn, self._wants_ctx(len(given), kwargs)
        call_args = tuple(given)

        if inspect.iscoroutinefunction(fn):

            async def body() -> Any:
                extra = {"ctx": primitives.current_step()} if wants_ctx else {}
                return await fn(*call_args, **kwargs, **extra)

        else:

            def body() -> Any:  # type: ignore[misc]
                extra = {"ctx": primitives.current_step()} if wants_ctx else {}
                return fn(*call_args, **kwargs, **extra)

        result = await run_step(self.name, body, retries=self.retry, timeout=self.timeout)
        self.owner._results[self] = result
        return result

    def _open(self, positional: int, kwargs: dict[str, Any]) -> list[inspect.Parameter]:
        """The parameters the caller left to be filled."""
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        params = [p for p in self.parameters.values() if p.kind in kinds]
        taken = {p.name for p in params[:positional] if p.kind is not p.KEYWORD_ONLY}
        return [p for p in params if p.name not in taken and p.name not in kwargs]

    def _wants_ctx(self, positional: int, kwargs: dict[str, Any]) -> bool:
        return any(p.name == "ctx" for p in self._open(positional, kwargs))

    def _wanted(self, positional: int, kwargs: dict[str, Any]) -> list[str]:
        """The open parameters named after step functions; TypeError for an unknown one."""
        wanted = []
        for param in self._open(positional, kwargs):
            if param.name == "ctx":
                continue
            if param.name in self.earlier:
                wanted.append(param.name)
            elif param.default is inspect.Parameter.empty:
                known = ", ".join(sorted(self.earlier)) or "none"
                raise TypeError(
                    f"step {self.name!r}: parameter {param.name!r} names no step function "
                    f"declared before it (declared: {known}); a parameter named after an "
                    "earlier @step.do function receives its result, and `ctx` the step's "
                    "context"
                )
        return wanted

    async def _results_of(self, functions: list[Any]) -> list[Any]:
        """The results of these step functions, running those that have not run yet."""
        if self.concurrent:
            return list(await asyncio.gather(*(self._result_of(f) for f in functions)))
        return [await self._result_of(f) for f in functions]

    async def _result_of(self, function: StepFunction) -> Any:
        owner = self.owner
        if function in owner._results:
            return owner._results[function]
        pending = owner._resolving.get(function)
        if pending is not None:
            return await asyncio.shield(pending)
        pending = asyncio.get_running_loop().create_future()
        owner._resolving[function] = pending
        try:
            result = await function()
        except BaseException as exc:
            pending.set_exception(exc)
            pending.exception()  # retrieved: whoever waits for it gets it raised
            raise
        finally:
            del owner._resolving[function]
        pending.set_result(result)
        return result
