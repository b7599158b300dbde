"""Class-based steps: the options a `cairn.Step` subclass declares as class attributes.

`class FetchUser(cairn.Step): max_retries = 5; retry_delay = "exponential"` sets what
`@cairn.step(max_retries=5, retry_delay="exponential")` does. The names are the
decorator's own (`cairn.authoring.step.OPTIONS`, read from its signature), so the two
spellings cannot drift apart. They are checked when the class statement runs, as the
decorator checks its arguments when it decorates.

A public class attribute that looks like an option but is none is refused there, naming
the known options: a typo of an option (`max_retry`, `time_out`, `retry_dealy`,
`MAX_RETRIES`; see `_typo_of`), a DBOS word that belongs in `options = {...}`
(`max_attempts`), or a word of `cairn.Retry` that belongs in `retries = cairn.Retry(...)`
(`delay`, `backoff`). Other attributes (constants, helpers, methods, `_private` ones,
and words of the class's own that merely look like an option: `entries`, `names`,
`queue_url`, `timeouts`) are the class's own business and left alone.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from cairn.authoring import options as seed_options
from cairn.authoring.retry import Retry
from cairn.authoring.step import OPTIONS
from cairn.errors import InvalidArguments

__all__ = ["check_class", "declared"]

# Options this short take a changed letter for another word (`game` is no `name`), so
# only a letter missing, added or swapped makes a typo of one.
_SHORT = 6
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
                raise InvalidArguments(
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
    for option in OPTIONS:
        if _typo_of(attribute, option):
            return f"did you mean {option!r}?"
    return None


def _typo_of(attribute: str, option: str) -> bool:
    """True if `attribute` is `option` mistyped, not a word of its own.

    The same letters in another case or with other separators (`MAX_RETRIES`,
    `time_out`), a plural option in the singular (`max_retry`, `option`), or one letter
    missing, added, changed or swapped with its neighbour (`timout`, `retry_dealy`). An
    option's plural is a word of its own (`names`, `queues`, `timeouts`: a collection),
    and so is anything further off (`entries` is two letters from `retries`).
    """
    typed, meant = _letters(attribute), _letters(option)
    if typed == meant + "s":
        return False
    singular = meant[:-3] + "y" if meant.endswith("ies") else meant.removesuffix("s")
    if typed in (meant, singular):
        return True
    return _one_edit(typed, meant, substitute=len(meant) >= _SHORT)


def _letters(name: str) -> str:
    return name.lower().replace("_", "")


def _one_edit(typed: str, meant: str, *, substitute: bool) -> bool:
    """True if `typed` is `meant` with one letter missing, added, swapped or changed."""
    if abs(len(typed) - len(meant)) > 1 or typed == meant:
        return False
    if len(typed) == len(meant):
        diffs = [i for i, (a, b) in enumerate(zip(typed, meant, strict=True)) if a != b]
        if len(diffs) == 1:
            return substitute
        first, *rest = diffs
        return (
            rest == [first + 1]
            and typed[first] == meant[first + 1]
            and (typed[first + 1] == meant[first])
        )
    shorter, longer = sorted((typed, meant), key=len)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def _is_code(value: Any) -> bool:
    """A method, property or nested class: the class's own code, never an option."""
    if isinstance(value, staticmethod | classmethod | property):
        return True
    return inspect.isfunction(value) or inspect.isclass(value)
