"""Industrial tags as durable steps: `tags.read`, `tags.write`, `tags.write_confirm`.

Tags are reached through a provider: `[tool.cairn.tags] provider = "opcua://host:4840"`
(the built-in OPC UA provider, connected for each step), or any object with async
`read(path)` and `write(path, value)` given to `Engine(tags=...)`.
"""

from __future__ import annotations

import asyncio
import importlib
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol, runtime_checkable

from cairn.authoring import usage
from cairn.authoring.retry import Retry, coerce
from cairn.errors import InvalidValue
from cairn.steps import calling
from cairn.steps.errors import TagError, WaitTimeout
from cairn.steps.opcua import OpcUaProvider

__all__ = ["DEFAULT_RETRY", "TagProvider", "read", "same", "session", "write", "write_confirm"]

DEFAULT_RETRY = Retry()
"""Three attempts, 1 s then 2 s apart; only an unreachable server retries."""


@runtime_checkable
class TagProvider(Protocol):
    """Where tags live: implement these two methods to bring your own.

    Both are coroutines. Raise `cairn.steps.TagUnavailable` (retried) when the server
    cannot be reached and `cairn.steps.TagError` (not retried) for a tag that does not
    exist or a value it refuses; any other exception is retried like a step's.
    """

    async def read(self, path: str) -> Any:
        """The tag's current value."""
        ...

    async def write(self, path: str, value: Any) -> None:
        """Set the tag to `value`."""
        ...


@usage.checked("cairn.steps.tags.read")
def read(path: str, *, name: str | None = None, retries: Retry | int | None = None) -> Any:
    """Read a tag as a durable step (its value is recorded).

    Returns:
        The value (an awaitable of it in an async workflow).

    Raises:
        TagError: No provider is set, or the tag does not exist.
        TagUnavailable: The provider's server cannot be reached, once retries are spent.
    """
    _check_path(path, "tags.read")

    async def body(path: str) -> Any:
        async with session() as tags:
            return await tags.read(path)

    return calling.call(name or "tags.read", body, (path,), retries=_policy(retries))


@usage.checked("cairn.steps.tags.write")
def write(
    path: str, value: Any, *, name: str | None = None, retries: Retry | int | None = None
) -> Any:
    """Write a tag as a durable step.

    Returns:
        None (an awaitable in an async workflow).

    Raises:
        TagError: No provider is set, no such tag, or it refuses the value.
        TagUnavailable: The provider's server cannot be reached, once retries are spent.
    """
    _check_path(path, "tags.write")

    async def body(path: str, value: Any) -> None:
        async with session() as tags:
            await tags.write(path, value)

    return calling.call(name or "tags.write", body, (path, value), retries=_policy(retries))


@usage.checked("cairn.steps.tags.write_confirm")
def write_confirm(
    path: str,
    value: Any,
    confirm_path: str | None = None,
    timeout_ms: float = 10000,
    poll_ms: float = 250,
    *,
    name: str | None = None,
    retries: Retry | int | None = None,
) -> Any:
    """Write a tag, then read it back (or `confirm_path`) until it equals `value`.

    One durable step: the write and the reads share one connection, polling every
    `poll_ms` for at most `timeout_ms` (numbers compare with a relative tolerance of
    1e-6, so a 32-bit float tag confirms the value it was given). A confirmation that
    never comes is not retried: writing again is the operator's call.

    Returns:
        The value read back (an awaitable of it in an async workflow).

    Raises:
        WaitTimeout: The tag did not read `value` within `timeout_ms`; names both tags
            and the last value read.
        TagError, TagUnavailable: As for `write`.
    """
    _check_path(path, "tags.write_confirm")
    if confirm_path is not None:
        _check_path(confirm_path, "tags.write_confirm confirm_path")
    limit = calling.positive_ms(timeout_ms, "tags.write_confirm timeout_ms")
    every = calling.positive_ms(poll_ms, "tags.write_confirm poll_ms")

    async def body(path: str, value: Any, confirm_path: str | None) -> Any:
        target = confirm_path or path
        async with session() as tags:
            await tags.write(path, value)
            found, last = await poll_equal(tags, target, value, limit, every)
        if found:
            return last
        after = "" if target == path else f" after writing {path!r}"
        raise WaitTimeout(
            f"tag {target!r} did not read {value!r} within {timeout_ms:g} ms{after} "
            f"(last read: {last!r})",
            last=last,
        )

    args = (path, value, confirm_path)
    return calling.call(name or "tags.write_confirm", body, args, retries=_policy(retries))


async def poll_equal(
    tags: TagProvider, path: str, expected: Any, limit: float, every: float
) -> tuple[bool, Any]:
    """Read `path` every `every` seconds for `limit` seconds: (found, last value read).

    Stops at a cancellation of the run this code is part of (raising `cairn.Cancelled`).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        last = await tags.read(path)
        if same(last, expected):
            return True, last
        left = deadline - loop.time()
        if left <= 0:
            return False, last
        calling.check_cancelled()
        await asyncio.sleep(min(every, left))


def same(found: Any, expected: Any) -> bool:
    """Whether a tag's value is `expected`; numbers within a relative 1e-6."""
    numbers = (int, float)
    if (
        isinstance(found, numbers)
        and isinstance(expected, numbers)
        and not isinstance(found, bool)
        and not isinstance(expected, bool)
    ):
        return math.isclose(found, expected, rel_tol=1e-6)
    return bool(found == expected)


@asynccontextmanager
async def session() -> AsyncIterator[TagProvider]:
    """The configured provider, connected for the time of the block (URL ones only).

    Raises:
        TagError: No provider is set, or the setting names none.
    """
    setting = calling.resources().tags
    if setting is None:
        raise TagError(
            'no tag provider: set [tool.cairn.tags] provider = "opcua://host:4840" or '
            "Engine(tags=...)"
        )
    if isinstance(setting, str) and "://" in setting:
        async with OpcUaProvider(setting) as provider:
            yield provider
        return
    if isinstance(setting, str):
        setting = _imported(setting)
    if not isinstance(setting, TagProvider):
        raise TagError(
            f"the tag provider {setting!r} has no async read(path) and write(path, value)"
        )
    yield setting


def _imported(path: str) -> Any:
    """The object a "module:attribute" setting names."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise TagError(
            f"tag provider {path!r}: write a URL (opcua://host:4840) or module:attribute"
        )
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise TagError(f"tag provider {path!r} cannot be imported: {exc}") from exc
    return found


def _check_path(path: Any, what: str) -> None:
    if not isinstance(path, str) or not path.strip():
        raise InvalidValue(f"{what}: a tag path must be a non-empty string, got {path!r}")


def _policy(retries: Retry | int | None) -> Retry:
    return DEFAULT_RETRY if retries is None else coerce(retries)
