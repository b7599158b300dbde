"""The root of cairn's errors and the usage errors the plain modules raise.

`cairn.errors` re-exports each of them and holds the rest of the tree; they live here so
that `durations` and `names`, which `errors` itself uses, can raise them without an
import circle.
"""

from __future__ import annotations

from typing import Any, ClassVar


class CairnError(Exception):
    """A cairn error."""

    usage: ClassVar[bool] = False
    """True on the errors that mean the code calling cairn is wrong (a usage error): a
    step whose code raises one fails at once instead of being retried."""

    def __init__(self, message: str | None = None, *args: Any) -> None:
        super().__init__(message or (self.__doc__ or "").strip(), *args)

    @property
    def message(self) -> str:
        """The human-readable message."""
        return str(self.args[0]) if self.args else ""


class NotInRun(CairnError):
    """This function only works inside a running workflow; outside one use engine.start()."""

    usage = True


class InvalidName(CairnError, ValueError):
    """A name or id cairn would store is empty, too long, or holds a byte no store keeps."""

    usage = True


class InvalidArguments(CairnError, TypeError):
    """Arguments that do not fit: a start's the workflow's, or a call's a cairn function's.

    A wrong call of a cairn function (`cairn.current_step(1)`) gives its signature; a
    value of a type it cannot take (`headers=["x"]`) names the argument.
    Missing or unexpected arguments, or a value that cannot be converted to the
    parameter's annotated type. `parameter` names the parameter at fault, when one is.
    """

    usage = True

    def __init__(self, message: str = "", *, workflow: str = "", parameter: str = "") -> None:
        super().__init__(message)
        self.workflow = workflow
        self.parameter = parameter


class InvalidValue(CairnError, ValueError):
    """A value given to a cairn function that it cannot use: a bad duration, limit or rate.

    cairn's own checks of its arguments raise it (a ValueError, as they raised before),
    naming the argument and what it takes; a ValueError of other code is not one.
    """

    usage = True


# Their public home is cairn.errors: recorded error types, reprs and pickles name it.
for _error in (CairnError, NotInRun, InvalidName, InvalidArguments, InvalidValue):
    _error.__module__ = "cairn.errors"
