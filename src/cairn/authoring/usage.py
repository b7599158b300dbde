"""A wrong call of a cairn function, told apart from a TypeError of the code it runs.

`@checked("cairn.sleep")` wraps a public cairn function: a call whose arguments do not
bind to its signature raises `cairn.InvalidArguments` (a usage error, see cairn.errors)
giving the signature, so that a step calling it wrongly fails at once instead of being
retried. A TypeError from deeper down (the function's own checks, or code of the user's
that it runs) passes unchanged.

A call whose arguments do not bind fails before the called function's frame exists:
its traceback stops at the frame of the call. That is how the wrapper knows one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from cairn.errors import InvalidArguments

__all__ = ["checked"]

P = ParamSpec("P")
R = TypeVar("R")


def checked(public: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make a wrong call of the decorated function an InvalidArguments naming `public`."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except TypeError as exc:
                if exc.__traceback__ is None or exc.__traceback__.tb_next is not None:
                    raise  # raised inside fn: not about how it was called
                raise InvalidArguments(
                    f"wrong call of {public}: {_without_name(exc)}; it takes "
                    f"{public}{_signature(fn)}"
                ) from None

        return call

    return decorate


def _without_name(exc: TypeError) -> str:
    """Python's message without its own `name()` prefix (the public name is given)."""
    text = str(exc)
    head, sep, rest = text.partition("() ")
    return rest if sep and "(" not in head and " " not in head else text


def _signature(fn: Callable[..., object]) -> str:
    """`fn`'s parameters as a caller writes them: names and defaults, no annotations."""
    signature = inspect.signature(fn)
    bare = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=signature.empty))
