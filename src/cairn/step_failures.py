"""The exception a workflow gets from a failed step: the step's own, and `StepFailed`.

`except TemporaryError as e:` around a step call catches its final failure, and `e` reads
like the exception the step raised, as in DBOS and pyworkflow: the same `args`, `str()`
and attributes (those cairn's JSON codec stores: see `keep`). It is an instance of a class
made from both `StepFailed` (or `StepTimeout`) and the class the step raised, so
`except cairn.StepFailed` catches it too and `.step_name`, `.attempts`, `.error_type`,
`.message` and `.traceback` are there; cairn's account ("step 'x' failed after 3
attempt(s): ...") is a note (PEP 678), shown under the message in a traceback.

That is done only for a class that a replay finds again by its stored name (a
module-level class whose module is imported or may be, by the rule of stored values), so a
replay raises exactly what the first execution raised; any other class (local,
unimportable, unsubclassable) gives `StepFailed` alone, whose message is cairn's account.
The original exception's own `__init__` is never called: its state is restored as stored.
"""

from __future__ import annotations

import json
import types
import weakref
from typing import Any

from cairn.errors import SerializationError, StepFailed, StepTimeout
from cairn.serialization.serializers import JsonSerializer

__all__ = ["failure", "from_dict", "keep", "rebuild", "resolvable"]

# (cause, kind) -> combined class, or None when they cannot be combined.
_MADE: weakref.WeakKeyDictionary[type[BaseException], dict[type[StepFailed], type | None]] = (
    weakref.WeakKeyDictionary()
)
# The exception's state is stored with cairn's JSON codec whatever the engine's serializer:
# a failure record is read by replays and tools that never unpickle.
_CODEC = JsonSerializer()
# cairn's facts on a failure, which win over an attribute of the same name of the original.
_FACTS = ("step_name", "attempts", "error_type", "error_message", "traceback", "fatal")


def keep(exc: BaseException) -> dict[str, Any]:
    """The state of `exc` to restore on its failure: its args and attributes, stored form.

    A JSON object `{"args": [...], "attributes": {...}}` in cairn's tagged JSON. What the
    codec cannot store is left out: an attribute, or the args as a whole (the failure
    then has the message as its only argument).
    """
    kept: dict[str, Any] = {}
    stored = _stored(list(exc.args))
    if stored is not None:
        kept["args"] = stored
    attributes = {}
    for name, value in getattr(exc, "__dict__", {}).items():
        stored = _stored(value)
        if stored is not None:
            attributes[name] = stored
    kept["attributes"] = attributes
    return kept


def failure(
    kind: type[StepFailed],
    cause: type[BaseException] | None,
    original: dict[str, Any] | None = None,
    **facts: Any,
) -> StepFailed:
    """A `kind` (StepFailed, StepTimeout) that is also a `cause` when that is possible.

    Args:
        kind: StepFailed or one of its subclasses.
        cause: The class of the exception the step raised; None for none.
        original: Its state as `keep` stored it, restored on the combined failure.
        **facts: StepFailed's keyword arguments (step_name, attempts, error_type, ...).
    """
    combined = None if cause is None else _combined(kind, cause)
    if combined is not None:
        try:
            args, attributes = _restored(original, facts)
            return _make(combined, kind, args, attributes, facts)
        except Exception:  # a class whose construction still fails: StepFailed alone
            pass
    return kind(**facts)


def rebuild(
    kind: type[StepFailed], error_type: str, facts: dict[str, Any], original: Any = None
) -> StepFailed:
    """A recorded failure raised again: combined with the class named `error_type` if found."""
    kept = original if isinstance(original, dict) else None
    return failure(kind, resolvable(error_type), kept, **facts)


def from_dict(data: dict[str, Any]) -> StepFailed:
    """A failure recorded by `StepFailed.to_dict`, raised again (on replay, or awaited).

    Like the first time, it is also an instance of the step's own exception class when
    that class can be found again, with the args and attributes recorded under "original".
    """
    kind: type[StepFailed] = StepTimeout if data.get("timeout") else StepFailed
    facts = {
        "step_name": data["step_name"],
        "attempts": data["attempts"],
        "error_type": data["error_type"],
        "error_message": data["message"],
        "traceback": data.get("traceback", ""),
        "fatal": data.get("fatal", False),
    }
    if kind is StepTimeout:
        return kind(**facts)
    return rebuild(kind, str(data["error_type"]), facts, data.get("original"))


def resolvable(error_type: str) -> type[BaseException] | None:
    """The exception class a stored `module.qualname` names, if a replay can find it."""
    from cairn import serialization

    parts = error_type.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = serialization.resolve_type(".".join(parts[:cut]) + ":" + ".".join(parts[cut:]))
        if found is not None:
            return found if issubclass(found, BaseException) else None
    return None


def _stored(value: Any) -> Any:
    """`value` in stored form (a JSON value), or None when the codec cannot store it."""
    try:
        return json.loads(_CODEC.dumps(value, what="an exception's state"))
    except (SerializationError, ValueError, TypeError):
        return None


def _restored(
    original: dict[str, Any] | None, facts: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The args and attributes `keep` stored, decoded; the message alone when none were."""
    args: tuple[Any, ...] = (facts.get("error_message", ""),)
    attributes: dict[str, Any] = {}
    if original:
        decoded = _CODEC.loads(json.dumps(original))
        if isinstance(decoded.get("args"), list):
            args = tuple(decoded["args"])
        if isinstance(decoded.get("attributes"), dict):
            attributes = decoded["attributes"]
    return args, attributes


def _make(
    combined: type,
    kind: type[StepFailed],
    args: tuple[Any, ...],
    attributes: dict[str, Any],
    facts: dict[str, Any],
) -> StepFailed:
    made: StepFailed = combined.__new__(combined)  # type: ignore[call-overload]
    BaseException.__init__(made, *args)
    plain = kind(**facts)
    made.__dict__.update(attributes)
    made.__dict__.update(plain.__dict__)  # cairn's facts win on a name both have
    note = plain.summary.removesuffix(f": {plain.error_message}")
    if note not in getattr(made, "__notes__", ()):
        made.add_note(note)
    return made


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

    def __init__(self: StepFailed, *args: Any, **facts: Any) -> None:
        # Made by `_make`, which never calls this: the cause's __init__ may need arguments
        # a failure does not have. Called again by code that re-inits an exception.
        pass

    def __str__(self: StepFailed) -> str:
        return self.error_message  # str() of the original, whatever its __str__ was

    def message(self: StepFailed) -> str:
        # The original's own `message` attribute if it had one, else its str().
        own = self.__dict__.get("message")
        return self.error_message if own is None else own

    def set_message(self: StepFailed, value: Any) -> None:
        self.__dict__["message"] = value

    def __reduce__(self: StepFailed) -> tuple[Any, ...]:
        return (_unpickle, (kind, cause, self.args, dict(self.__dict__)))

    return {
        "__module__": kind.__module__,
        "__qualname__": kind.__qualname__,  # stored and shown as cairn.errors.StepFailed
        "__doc__": kind.__doc__,
        "__new__": __new__,
        "__init__": __init__,
        "__str__": __str__,
        "__repr__": BaseException.__repr__,
        "__reduce__": __reduce__,
        "message": property(message, set_message, doc=StepFailed.message.__doc__),
    }


def _unpickle(
    kind: type[StepFailed], cause: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]
) -> StepFailed:
    """Pickle's way back to a combined failure."""
    facts = {name: state[name] for name in _FACTS if name in state}
    combined = _combined(kind, cause)
    if combined is not None:
        try:
            return _make(combined, kind, args, state, facts)
        except Exception:
            pass
    return kind(**facts)
