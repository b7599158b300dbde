"""Tests that stand in for one store operation: route its calls to a stand-in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from cairn.store import Store
from cairn.store.programs.base import Operation, OperationKind


def intercept(
    store: Store,
    kind: OperationKind[Any, Any],
    stand_in: Callable[..., Awaitable[Any]],
    *,
    via: Literal["write", "read"] = "write",
    plain: bool = False,
) -> tuple[Callable[..., Awaitable[Any]], Callable[[], None]]:
    """Send `store.write(op)` (or `read`) of `kind`'s operations to `stand_in(*args, **kw)`.

    With `plain`, only calls without keyword arguments are sent (record_step, not its
    upserts). Returns `real` (`await real(*args, **kw)` runs the operation itself) and
    `restore` (ends the interception).
    """
    method = getattr(store, via)

    async def routed(op: Any) -> Any:
        if isinstance(op, Operation) and op.kind is kind and not (plain and op.kwargs):
            return await stand_in(*op.args, **op.kwargs)
        return await method(op)

    async def real(*args: Any, **kwargs: Any) -> Any:
        return await method(kind(*args, **kwargs))

    def restore() -> None:
        setattr(store, via, method)

    setattr(store, via, routed)
    return real, restore
