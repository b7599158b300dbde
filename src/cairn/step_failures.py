"""The exception a workflow gets from a failed step: `StepFailed`, and the step's own class.

`except TemporaryError:` around a step call catches its final failure, as in DBOS and
pyworkflow: the raised exception is an instance of a class made from both `StepFailed`
(or `StepTimeout`) and the class the step raised. That is done only for a class that a
replay finds again by its stored name (a module-level class whose module is imported or
may be, by the rule of stored values), so a replay raises exactly what the first
execution raised; any other class (local, unimportable, unsubclassable) gives
`StepFailed` alone. The original exception's own `__init__` is never called.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

from cairn.errors import StepFailed

__all__ = ["failure", "rebuild", "resolvable"]

# (cause, kind) -> combined class, or None when they cannot be combined.
_MADE: weakref.WeakKeyDictionary[type[BaseException], dict[type[StepFailed], type | None]] = (
    weakref.WeakKeyDictionary()
)


def failure(kind: type[StepFailed], cause: type[BaseException] | None, **facts: Any) -> StepFailed:
    """A `kind` (StepFailed, StepTimeout) that is also a `cause` when that is possible.

    Args:
        kind: StepFailed or one of its subclasses.
        cause: The class of the exception the step raised; None for none.
        **facts: StepFailed's keyword arguments (step_name, attempts, error_type, ...).
    """
    combined = None if cause is None else _combined(kind, cause)
    if combined is not None:
        try:
            made: StepFailed = combined(**facts)
            return made
        except Exception:  # a class whose construction still fails: StepFailed alone
            pass
    return kind(**facts)


def rebuild(kind: type[StepFailed], error_type: str, facts: dict[str, Any]) -> StepFailed:
    """A recorded failure raised again: combined with the class named `error_type` if found."""
    return failure(kind, resolvable(error_type), **facts)


def resolvable(error_type: str) -> type[BaseException] | None:
    """The exception class a stored `module.qualname` names, if a replay can find it."""
    from cairn import serialization

    parts = error_type.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = serialization.resolve_type(".".join(parts[:cut]) + ":" + ".".join(parts[cut:]))
        if found is not None:
            return found if issubclass(found, BaseException) else None
    return None


def _combined(kind: type[StepFailed], cause: type[BaseException]) -> type | None:
    try:
        by_kind = _MADE.setdefault(cause, {})
    except TypeError:  # not weak-referenceable: not cached
        by_kind = {}
    if kind in by_kind:
        return by_kind[kind]
    made = None
    if _may_combine(cause):
        try:
            made = types.new_class(
                kind.__name__, (kind, cause), exec_body=lambda ns: ns.update(_body(kind, cause))
            )
        except Exception:  # a final class, a layout or metaclass conflict...
            made = None
    by_kind[kind] = made
    return made


def _may_combine(cause: type[BaseException]) -> bool:
    if not issubclass(cause, Exception) or issubclass(cause, StepFailed):
        return False
    # Only what a replay finds again by name, so that both raise the same thing.
    return resolvable(f"{cause.__module__}.{cause.__qualname__}") is cause


def _body(kind: type[StepFailed], cause: type[BaseException]) -> dict[str, Any]:
    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        return cause.__new__(cls)

    def __init__(self: StepFailed, message: str = "", **facts: Any) -> None:
        # StepFailed's own attributes and message; the cause's __init__ is not run (it may
        # need arguments this failure does not have).
        plain = kind(message, **facts)
        BaseException.__init__(self, *plain.args)
        self.__dict__.update(plain.__dict__)

    def __reduce__(self: StepFailed) -> tuple[Any, ...]:
        facts = {
            "step_name": self.step_name,
            "attempts": self.attempts,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "traceback": self.traceback,
            "fatal": self.fatal,
        }
        return (_unpickle, (kind, cause, str(self), facts))

    return {
        "__module__": kind.__module__,
        "__qualname__": kind.__qualname__,  # stored and shown as cairn.errors.StepFailed
        "__doc__": kind.__doc__,
        "__new__": __new__,
        "__init__": __init__,
        "__str__": BaseException.__str__,
        "__repr__": BaseException.__repr__,
        "__reduce__": __reduce__,
    }


def _unpickle(
    kind: type[StepFailed], cause: type[BaseException], message: str, facts: dict[str, Any]
) -> StepFailed:
    """Pickle's way back to a combined failure."""
    combined = _combined(kind, cause)
    if combined is not None:
        try:
            made: StepFailed = combined(message, **facts)
            return made
        except Exception:
            pass
    return kind(message, **facts)
