"""A start's arguments fitted to the workflow's signature: checked, then converted to its types.

Missing, extra and unexpected arguments are refused before anything is stored, and each
value is converted to its parameter's annotated type (see `conversion`). A function whose
signature cannot be read is left unchecked.
"""

from __future__ import annotations

import enum
import inspect
import json
import sys
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from cairn import conversion
from cairn.errors import InvalidArguments
from cairn.serialization import TEXT_FORMS

_EMPTY = inspect.Parameter.empty


@dataclass(frozen=True, slots=True)
class _Plan:
    """What fitting a function's arguments needs: its signature and resolved annotations."""

    signature: inspect.Signature
    hints: dict[str, Any]
    """Resolved annotations by parameter name; parameters without one are absent."""
    simple: tuple[tuple[inspect.Parameter, str, Any], ...] | None
    """The parameters when all are plain positional-or-keyword ones (the common case, fitted
    without `Signature.bind`), each with its name and resolved annotation (None: none), else
    None."""
    required: int
    """How many of `simple` have no default."""


_PLANS: weakref.WeakKeyDictionary[Callable[..., Any], _Plan | None] = weakref.WeakKeyDictionary()

NOTHING: Any = object()
"""What `from_text` returns when the parameter's type does not read text itself."""


def fit(
    fn: Callable[..., Any],
    args: tuple[Any, ...] | list[Any],
    kwargs: dict[str, Any],
    *,
    workflow: str,
    reserved: Collection[str] = (),
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args` and `kwargs` checked against `fn`'s signature and converted to its types.

    Positional arguments stay positional and keywords stay keywords. `reserved` names the
    caller's own options, listed when an unexpected keyword may be one of them misspelt.

    Raises:
        InvalidArguments: a missing, extra or unexpected argument, or a value that cannot
            be converted; the message names `workflow`, the parameter and the value.
    """
    plan = _plan(fn)
    if plan is None:
        return tuple(args), kwargs
    simple = plan.simple
    if simple is not None and not kwargs and plan.required <= len(args) <= len(simple):
        # Positional arguments only, of a plain signature: they bind one to one.
        return tuple(
            value if hint is None else _fit_one(value, hint, param, workflow, name)
            for (param, name, hint), value in zip(simple, args, strict=False)
        ), kwargs
    try:
        plan.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise _unbound(exc, workflow, plan, kwargs, reserved) from None
    if not plan.hints:
        return tuple(args), kwargs
    new_args = list(args)
    new_kwargs = dict(kwargs)
    params = plan.signature.parameters
    position = 0
    for param in params.values():
        hint = plan.hints.get(param.name)
        if param.kind is param.VAR_POSITIONAL:
            for index in range(position, len(new_args)):
                label = f"{param.name}[{index - position}]"
                new_args[index] = _fit_one(new_args[index], hint, param, workflow, label)
            position = len(new_args)
        elif param.kind is param.VAR_KEYWORD:
            for key in new_kwargs:
                if key not in params or params[key].kind is param.POSITIONAL_ONLY:
                    new_kwargs[key] = _fit_one(new_kwargs[key], hint, param, workflow, key)
        elif param.kind is not param.KEYWORD_ONLY and position < len(new_args):
            new_args[position] = _fit_one(new_args[position], hint, param, workflow, param.name)
            position += 1
        elif param.name in new_kwargs and param.kind is not param.POSITIONAL_ONLY:
            new_kwargs[param.name] = _fit_one(
                new_kwargs[param.name], hint, param, workflow, param.name
            )
    return tuple(new_args), new_kwargs


def hint_of(fn: Callable[..., Any], *, position: int | None = None, name: str | None = None) -> Any:
    """The annotated type of the parameter taking positional argument `position` or keyword `name`.

    `position` counts from 0. `Any` when there is no annotation or it cannot be known.
    """
    plan = _plan(fn)
    if plan is None:
        return Any
    positional = 0
    for param in plan.signature.parameters.values():
        if position is not None:
            if param.kind is param.VAR_POSITIONAL or (
                param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
                and positional == position
            ):
                return plan.hints.get(param.name, Any)
            positional += 1
        elif param.kind is param.VAR_KEYWORD or (
            param.name == name and param.kind is not param.POSITIONAL_ONLY
        ):
            return plan.hints.get(param.name, Any)
    return Any


def from_text(text: str, hint: Any) -> Any:
    """A command-line value read the way its parameter's type wants, or `NOTHING`.

    A `str` parameter takes the text as typed (`00123` stays `"00123"`; a JSON string is
    unquoted); a `Decimal`, date, time, datetime, UUID or enum parameter parses the text
    itself, so `59.90` is `Decimal("59.90")`, not the float 59.9. `NOTHING`: read the
    text the usual way (JSON when it parses, else the string).
    """
    inner = conversion.optional_inner(hint)
    if inner is str:
        try:
            found = json.loads(text)
        except ValueError:
            return text
        return found if isinstance(found, str) else text
    if isinstance(inner, type) and (inner in TEXT_FORMS or issubclass(inner, enum.Enum)):
        try:
            return conversion.convert(text, inner)
        except conversion.Misfit:
            return NOTHING
    return NOTHING


def _plan(fn: Callable[..., Any]) -> _Plan | None:
    try:
        return _PLANS[fn]
    except (KeyError, TypeError):  # TypeError: not weakly referenceable; computed each time
        pass
    plan: _Plan | None
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without one: nothing to check against
        plan = None
    else:
        target = inspect.unwrap(fn)
        globalns = getattr(target, "__globals__", None)
        if globalns is None:
            globalns = vars(sys.modules.get(getattr(fn, "__module__", ""), sys))
        hints = {
            name: conversion.resolve(param.annotation, globalns)
            for name, param in signature.parameters.items()
        }
        params = tuple(signature.parameters.values())
        plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        kept = {k: v for k, v in hints.items() if v is not Any}
        simple = tuple((p, p.name, kept.get(p.name)) for p in params) if plain else None
        plan = _Plan(signature, kept, simple, sum(p.default is _EMPTY for p in params))
    try:
        _PLANS[fn] = plan
    except TypeError:
        pass
    return plan


def _fit_one(value: Any, hint: Any, param: inspect.Parameter, workflow: str, label: str) -> Any:
    if hint is None or (value is None and param.default is None):
        return value  # no annotation; or `x: str = None`, whose default says None may be
    try:
        return conversion.convert(value, hint)
    except conversion.Misfit as exc:
        where = label + "".join(reversed(exc.where))
        reason = f": {exc.reason}" if exc.reason else ""
        raise InvalidArguments(
            f"workflow {workflow!r} argument {where!r}: expected "
            f"{conversion.describe(exc.hint)}, got {conversion.short(exc.value)} "
            f"({type(exc.value).__name__}){reason}",
            workflow=workflow,
            parameter=param.name,
        ) from None


def _unbound(
    exc: TypeError,
    workflow: str,
    plan: _Plan,
    kwargs: dict[str, Any],
    reserved: Collection[str],
) -> InvalidArguments:
    """The error for arguments `signature.bind` refused (missing, extra, unexpected)."""
    text = str(exc)
    params = plan.signature.parameters
    unexpected = [k for k in kwargs if f"'{k}'" in text and k not in params]
    named = [p for p in params if f"'{p}'" in text]
    hint = ""
    if unexpected and reserved:
        hint = f" (a start's own options are {', '.join(sorted(reserved))})"
    return InvalidArguments(
        f"arguments do not fit workflow {workflow!r} {_signature_text(plan)}: {text}{hint}",
        workflow=workflow,
        parameter=(unexpected or named or [""])[0],
    )


def _signature_text(plan: _Plan) -> str:
    """`(order_id: str, amount: Decimal, *, note: str = '')`, with types as people write them."""
    params = list(plan.signature.parameters.values())
    last_positional_only = max(
        (i for i, p in enumerate(params) if p.kind is p.POSITIONAL_ONLY), default=-1
    )
    parts: list[str] = []
    starred = False
    for index, param in enumerate(params):
        if param.kind is param.KEYWORD_ONLY and not starred:
            parts.append("*")
        starred = starred or param.kind in (param.KEYWORD_ONLY, param.VAR_POSITIONAL)
        text = param.name
        if param.kind is param.VAR_POSITIONAL:
            text = f"*{text}"
        elif param.kind is param.VAR_KEYWORD:
            text = f"**{text}"
        if param.name in plan.hints:
            text += f": {conversion.describe(plan.hints[param.name])}"
        if param.default is not _EMPTY:
            text += f" = {conversion.short(param.default)}"
        parts.append(text)
        if index == last_positional_only:
            parts.append("/")
    return f"({', '.join(parts)})"
