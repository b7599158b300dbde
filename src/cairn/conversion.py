"""A value converted to an annotated type, where the meaning is plain.

JSON and command-line text cannot carry a `Decimal`, a `datetime` or a dataclass, so
`"2024-05-01"` becomes a `date`, `59.9` `Decimal("59.9")` and a dict a dataclass. Nothing
is guessed: a value that does not fit raises Misfit, which names the type and the path
to the part at fault. `Any`, or an annotation that cannot be resolved, leaves it alone.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import sys
import types
import typing
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from cairn import durations
from cairn.serialization import TEXT_FORMS

_UNIONS = (typing.Union, types.UnionType)
# Concrete collections a JSON array (or any of these) converts to, element by element.
_SEQUENCES: tuple[type[Any], ...] = (list, tuple, set, frozenset)


class Misfit(Exception):
    """A value that does not fit its type; `where` is its path inside the argument."""

    def __init__(self, value: Any, hint: Any, reason: str = "") -> None:
        super().__init__(reason)
        self.value = value
        self.hint = hint
        self.reason = reason
        self.where: list[str] = []


def describe(hint: Any) -> str:
    """A type as people write it: `Decimal`, `list[UUID]`, `Order | None`."""
    if hint is None or hint is type(None):
        return "None"
    origin = typing.get_origin(hint)
    params = typing.get_args(hint)
    if origin in _UNIONS:
        return " | ".join(describe(member) for member in params)
    if origin is typing.Annotated:
        return describe(params[0])
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(choice) for choice in params)}]"
    if origin is not None and params:
        name = getattr(origin, "__qualname__", None) or str(origin)
        inner = ", ".join("..." if p is Ellipsis else describe(p) for p in params)
        return f"{name}[{inner}]"
    if isinstance(hint, type):
        return hint.__qualname__
    return str(hint).replace("typing.", "")


def resolve(annotation: Any, globalns: dict[str, Any]) -> Any:
    """An annotation as a type; `Any` when absent or when its text names nothing here."""
    if annotation is inspect.Parameter.empty:
        return Any
    if isinstance(annotation, typing.ForwardRef):  # how NamedTuple keeps string annotations
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        try:
            return eval(annotation, globalns)  # what typing.get_type_hints does with it
        except Exception:  # a name only a TYPE_CHECKING import or a local scope defines
            return Any
    return annotation


def _field_hints(kind: type[Any]) -> dict[str, Any]:
    """The annotations of a dataclass or named tuple, each resolved on its own."""
    globalns = vars(sys.modules.get(kind.__module__, sys))
    found: dict[str, Any] = {}
    for klass in reversed(kind.__mro__):
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            found[name] = resolve(annotation, globalns)
    return found


def optional_inner(hint: Any) -> Any:
    """`X` for `X`, `X | None`, `Optional[X]` and `Annotated[X, ...]`; else `hint`."""
    if typing.get_origin(hint) is typing.Annotated:
        return optional_inner(typing.get_args(hint)[0])
    if typing.get_origin(hint) in _UNIONS:
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        if len(members) == 1:
            return optional_inner(members[0])
    return hint


def convert(value: Any, hint: Any) -> Any:
    """`value` as `hint`: itself when it fits, converted when that is unambiguous.

    Raises:
        Misfit: the value (or a part of it, see `Misfit.where`) does not fit.
    """
    if hint is Any or hint is object or type(value) is hint:
        return value  # an instance of exactly the class: it fits (see `_to_class`)
    if hint is None or hint is type(None):
        if value is None:
            return value
        raise Misfit(value, hint)
    supertype = getattr(hint, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return convert(value, supertype)
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return convert(value, typing.get_args(hint)[0])
    if origin in _UNIONS:
        return _union(value, hint)
    if origin is typing.Literal:
        if any(value == choice and type(value) is type(choice) for choice in typing.get_args(hint)):
            return value
        raise Misfit(value, hint)
    if origin is not None:
        return _generic(value, hint, origin, typing.get_args(hint))
    if isinstance(hint, type):
        return _to_class(value, hint)
    return value  # a TypeVar, a string left unresolved, Callable...: nothing to check


def _union(value: Any, hint: Any) -> Any:
    members = typing.get_args(hint)
    for member in members:  # a value that already fits one member stays as it is
        if _fits(value, member):
            return value
    for member in members:
        try:
            return convert(value, member)
        except Misfit:
            continue
    raise Misfit(value, hint)


def _fits(value: Any, hint: Any) -> bool:
    if hint is None or hint is type(None):
        return value is None
    if not isinstance(hint, type) or typing.get_args(hint):
        return False
    try:
        return isinstance(value, hint)
    except TypeError:
        return False


def _to_class(value: Any, kind: type[Any]) -> Any:
    if kind in (float, complex) and type(value) is int:
        return value  # an int is an acceptable float (PEP 484)
    try:
        if isinstance(value, kind):
            return value
    except TypeError:  # a Protocol that cannot be checked at run time
        return value
    try:
        return _build(value, kind)
    except Misfit:
        raise
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise Misfit(value, kind, _one_line(exc)) from None


def _build(value: Any, kind: type[Any]) -> Any:
    """`value` converted to the class `kind`; Misfit (or a ValueError) when it cannot be."""
    if type(value) is bool:
        raise Misfit(value, kind)
    if issubclass(kind, enum.Enum):
        return _enum(value, kind)
    if kind is Decimal:
        return _decimal(value)
    if kind is timedelta and isinstance(value, str | int | float):
        return durations.parse(value, what="value")
    parse = TEXT_FORMS.get(kind)
    if parse is not None:
        if isinstance(value, str):
            return parse(value.strip())
        raise Misfit(value, kind)
    if dataclasses.is_dataclass(kind) and isinstance(value, Mapping):
        return _record(value, kind, [f.name for f in dataclasses.fields(kind) if f.init])
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a named tuple
        if isinstance(value, Mapping):
            return _record(value, kind, list(kind._fields))
        if isinstance(value, list | tuple):
            return _record(dict(zip(kind._fields, value, strict=False)), kind, list(kind._fields))
    if hasattr(kind, "model_validate") and isinstance(value, Mapping):
        return _model(value, kind)
    if kind in _SEQUENCES and isinstance(value, _SEQUENCES):
        return kind(value)
    raise Misfit(value, kind)


def _decimal(value: Any) -> Decimal:
    if isinstance(value, float) and math.isfinite(value):
        return Decimal(str(value))  # 59.9 is Decimal("59.9"), not its binary expansion
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            raise Misfit(value, Decimal, "not a decimal number") from None
        if number.is_finite():
            return number
    raise Misfit(value, Decimal)


def _enum(value: Any, kind: type[enum.Enum]) -> Any:
    try:
        return kind(value)
    except ValueError:
        if isinstance(value, str) and value in kind.__members__:
            return kind[value]
        choices = ", ".join(repr(m.value) for m in kind)
        raise Misfit(value, kind, f"not one of {choices}") from None


def _record(data: Mapping[Any, Any], kind: type[Any], names: list[str]) -> Any:
    """A dataclass or named tuple from a mapping, each field converted to its type."""
    unknown = [key for key in data if key not in names]
    if unknown:
        raise Misfit(dict(data), kind, f"unknown field {unknown[0]!r}")
    hints = _field_hints(kind)
    fields: dict[str, Any] = {}
    for name in names:
        if name in data:
            try:
                fields[name] = convert(data[name], hints.get(name, Any))
            except Misfit as exc:
                exc.where.append(f".{name}")
                raise
    try:
        return kind(**fields)
    except TypeError as exc:  # a field without a default is missing
        raise Misfit(dict(data), kind, _one_line(exc)) from None


def _model(data: Mapping[Any, Any], kind: type[Any]) -> Any:
    """A pydantic model validated from a mapping (pydantic converts its own fields)."""
    try:
        return kind.model_validate(dict(data))
    except Exception as exc:  # pydantic's ValidationError: report its first problem
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) and errors() else None
        if first is not None:
            where = ".".join(str(part) for part in first.get("loc", ()))
            reason = f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))
            raise Misfit(dict(data), kind, reason) from None
        raise Misfit(dict(data), kind, _one_line(exc)) from None


def _generic(value: Any, hint: Any, origin: Any, params: tuple[Any, ...]) -> Any:
    """A parametrised collection (`list[Decimal]`, `dict[str, Order]`, `tuple[int, str]`)."""
    if not isinstance(origin, type):
        return value
    if issubclass(origin, Mapping):
        if not isinstance(value, Mapping):
            raise Misfit(value, hint)
        key_hint, item_hint = (*params, Any, Any)[:2]
        out: dict[Any, Any] = {}
        for key, item in value.items():
            try:
                out[convert(key, key_hint)] = convert(item, item_hint)
            except Misfit as exc:
                exc.where.append(f"[{short(key)}]")
                raise
        return out
    if origin in (str, bytes) or not isinstance(value, _SEQUENCES):
        try:
            if isinstance(value, origin):
                return value  # a str for Sequence[str], a generator for Iterable[...]
        except TypeError:
            return value
        raise Misfit(value, hint)
    if origin is tuple and params and not (len(params) == 2 and params[1] is Ellipsis):
        if len(value) != len(params):
            raise Misfit(value, hint, f"{len(value)} items, expected {len(params)}")
        hints = list(params)
    else:
        hints = [params[0] if params else Any] * len(value)
    items = []
    for index, (item, item_hint) in enumerate(zip(value, hints, strict=True)):
        try:
            items.append(convert(item, item_hint))
        except Misfit as exc:
            exc.where.append(f"[{index}]")
            raise
    kind = origin if origin in _SEQUENCES else type(value)
    if not issubclass(kind, _SEQUENCES):
        return value
    return kind(items)


def short(value: Any) -> str:
    """`repr(value)`, cut short in the middle when long."""
    text = repr(value)
    return text if len(text) <= 60 else text[:45] + "..." + text[-10:]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
