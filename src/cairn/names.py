"""The one rule for every name and id cairn stores, so both stores accept the same ones.

Workflow, step, event, queue and hook names, run and schedule ids and column keys end up
in indexed text columns. SQLite would store almost anything and PostgreSQL refuses a NUL,
a lone surrogate or an index entry past ~2,700 bytes; checking up front gives one clear
error at the call instead of a write that fails (or succeeds on one store only) later.
"""

from __future__ import annotations

from typing import Any

from cairn.errors import InvalidName

MAX_LENGTH = 255
"""Characters in a name or id (at most 1,020 bytes of UTF-8, well inside any index)."""


def check_name(value: Any, what: str) -> str:
    """`value` if it is a storable name; else InvalidName naming `what` and the value.

    A name is a non-empty `str` of at most 255 characters with no NUL character and no
    lone surrogate (text that is not valid Unicode).
    """
    if not isinstance(value, str) or not value:
        raise InvalidName(f"{what} must be a non-empty string, got {_short(value)}")
    if len(value) > MAX_LENGTH:
        raise InvalidName(
            f"{what} {_short(value)} is {len(value)} characters long; the limit is {MAX_LENGTH}"
        )
    if "\x00" in value:
        raise InvalidName(f"{what} {_short(value)} contains a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidName(
                f"{what} {_short(value)} contains a lone surrogate (it is not valid Unicode)"
            ) from None
    return value


def check_queue_name(value: Any, what: str) -> str:
    """`value` if it is a storable queue name; else InvalidName naming `what` and the value.

    A name (see `check_name`) that is more than whitespace: a queue is named to route
    runs and steps to workers, and `" "` would show as nothing wherever it is listed.
    """
    name = check_name(value, what)
    if name.isspace():
        raise InvalidName(f"{what} {_short(name)} is only whitespace")
    return name


def findable(value: Any, what: str) -> bool:
    """False for a string no row can hold (a lookup by it finds nothing), True for a name.

    A lookup by id (a run, a task, a schedule) answers its NotFound for such a string,
    without asking the store (PostgreSQL would refuse a NUL). A value that is not a
    string at all is a mistake of the calling code: InvalidName naming `what`.
    """
    try:
        check_name(value, what)
    except InvalidName:
        if not isinstance(value, str):
            raise
        return False
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:45] + "..." + text[-10:]
