"""Class-based steps: the options a `cairn.Step` subclass declares as class attributes.

`class FetchUser(cairn.Step): max_retries = 5; retry_delay = "exponential"` sets what
`@cairn.step(max_retries=5, retry_delay="exponential")` does. The names are the
decorator's own (`cairn.authoring.step.OPTIONS`, read from its signature), so the two
spellings cannot drift apart. They are checked when the class statement runs, as the
decorator checks its arguments when it decorates.

A public class attribute that looks like an option but is none is refused there, naming
the known options: one whose name is within a typo of an option's (`max_retry`,
`time_out`, `MAX_RETRIES`), a DBOS word that belongs in `options = {...}`
(`max_attempts`), or a word of `cairn.Retry` that belongs in `retries = cairn.Retry(...)`
(`delay`, `backoff`). Other attributes (constants, helpers, methods, `_private` ones)
are the class's own business and left alone.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from typing import Any

from cairn.authoring import options as seed_options
from cairn.authoring.retry import Retry
from cairn.authoring.step import OPTIONS

__all__ = ["check_class", "declared"]

# How alike a name must be to an option's to be taken for a misspelling of it
# (difflib's ratio: `max_retry` is 0.8 from `max_retries`, `time_out` 0.93 from `timeout`).
_TYPO = 0.8
_RETRY_WORDS = tuple(f.name for f in dataclasses.fields(Retry) if f.init)


def declared(kind: type, base: type) -> dict[str, Any]:
    """The options the classes from `kind` up to (not including) `base` set, by name.

    The nearest class wins, as attribute lookup would have it; `base`'s own attributes
    (and those of its bases: a StepDef's fields) are not options of the subclass.
    """
    found: dict[str, Any] = {}
    for klass in kind.__mro__:
        if klass is base:
            break
        for option in OPTIONS:
            if option in klass.__dict__ and option not in found:
                found[option] = klass.__dict__[option]
    return found


def check_class(kind: type, base: type) -> None:
    """Refuse a class attribute of `kind` (below `base`) that looks like an option.

    Raises:
        TypeError: naming the attribute, what it may have meant, and the known options.
    """
    for klass in kind.__mro__:
        if klass is base:
            break
        for attribute, value in klass.__dict__.items():
            if attribute.startswith("_") or attribute in OPTIONS or _is_code(value):
                continue
            hint = _misspelled(attribute)
            if hint is not None:
                known = ", ".join(OPTIONS)
                raise TypeError(
                    f"class-based step {kind.__qualname__}: class attribute {attribute!r} is "
                    f"not a step option ({hint}); the options a class sets are: {known}"
                )


def _misspelled(attribute: str) -> str | None:
    """What `attribute` was probably meant as, or None if it does not look like an option."""
    lowered = attribute.lower()
    if lowered in seed_options.OPTION_KEYS:
        return f"DBOS's words go in options = {{{lowered!r}: ...}}"
    if lowered in _RETRY_WORDS:
        return f"a retry policy's {lowered} goes in retries = cairn.Retry({lowered}=...)"
    close = difflib.get_close_matches(lowered, OPTIONS, n=1, cutoff=_TYPO)
    if close:
        return f"did you mean {close[0]!r}?"
    return None


def _is_code(value: Any) -> bool:
    """A method, property or nested class: the class's own code, never an option."""
    if isinstance(value, staticmethod | classmethod | property):
        return True
    return inspect.isfunction(value) or inspect.isclass(value)
