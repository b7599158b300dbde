"""Checking SQL before it runs: values are bound, never written into the text.

A statement's text is scanned once (string literals, quoted names, comments and
placeholders told apart), and refused when it holds a string literal, a driver's own
placeholder (`%s`, `:1`, `$1`), a `{...}` template placeholder, more than one statement,
or placeholders that do not match its arguments. `?` placeholders are rewritten to
SQLAlchemy's named form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.steps.errors import InvalidSQL

__all__ = ["Bound", "bind"]

# One token of interest at a time; the rest of the text is copied as it is.
_TOKENS = re.compile(
    r"""
      (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
    | (?P<dollar>\$(?P<tag>[A-Za-z_]\w*)?\$)
    | (?P<string>[EeNnBbXx]?'(?:[^'\\]|''|\\.)*(?:'|\Z))
    | (?P<quoted>"(?:[^"]|"")*(?:"|\Z)|`(?:[^`]|``)*(?:`|\Z))
    | (?P<cast>::)
    | (?P<named>(?<![\w:]):(?P<name>[A-Za-z_]\w*))
    | (?P<qmark>\?)
    | (?P<format>%(?:\([A-Za-z_]\w*\))?s|(?<![\w:$]):\d+|(?<![\w$])\$\d+)
    | (?P<brace>\{[^{}]*\})
    | (?P<end>;)
    """,
    re.VERBOSE | re.DOTALL,
)
_SHOWN = 40  # characters of a refused literal quoted in the error

# Backends that read "..." as a string: SQLite does when no column has that name (so a
# value in double quotes passes for a name until it is read), MySQL and MariaDB always
# (without ANSI_QUOTES). On them a double-quoted token counts as a string literal.
_DOUBLE_QUOTED_STRINGS = {
    "sqlite": "SQLite reads it as a string when no column has that name",
    "mysql": "MySQL reads it as a string",
    "mariadb": "MariaDB reads it as a string",
}


@dataclass(frozen=True, slots=True)
class Bound:
    """A statement ready for SQLAlchemy's `text()`, with its parameters by name."""

    sql: str
    params: dict[str, Any]


def bind(
    sql: Any,
    args: Any,
    *,
    database: str,
    what: str,
    allow_literals: bool = False,
    backend: str | None = None,
) -> Bound:
    """Check `sql` and `args` together; the statement in SQLAlchemy's named form.

    Args:
        sql: The statement, with `:name` or `?` placeholders (not both).
        args: A dict for `:name` placeholders, a list or tuple for `?` ones, or None
            for none.
        database: The database's name, for errors.
        what: The calling step ("db.query"), for errors.
        allow_literals: Accept string literals in the text (constants such as
            `status = 'open'`).
        backend: The database's backend ("sqlite", "postgresql", ...) when known: on
            those that read `"..."` as a string, a double-quoted token is a literal too.

    Raises:
        InvalidSQL: Naming the database and the problem.
    """
    where = f"{what}({database!r})"
    if not isinstance(sql, str):
        raise InvalidSQL(
            f"{where}: sql must be a string, got {type(sql).__name__}", database=database
        )
    if not sql.strip():
        raise InvalidSQL(f"{where}: sql is empty", database=database)
    if args is not None and (
        isinstance(args, str | bytes) or not isinstance(args, Mapping | Sequence)
    ):
        raise InvalidSQL(
            f"{where}: args must be a dict (for :name), a list (for ?) or None, "
            f"got {type(args).__name__}",
            database=database,
        )
    out: list[str] = []
    names: list[str] = []
    marks = 0
    position = 0
    dollar_end: str | None = None
    for token in _TOKENS.finditer(sql):
        kind = token.lastgroup
        text = token.group()
        out.append(sql[position : token.start()])
        position = token.end()
        if dollar_end is not None:  # inside a $tag$...$tag$ string: copy, escaped
            out.append(_escaped(text))
            if kind == "dollar" and text == dollar_end:
                dollar_end = None
            continue
        if kind == "dollar":
            if not allow_literals:
                raise _literal(where, database, sql[token.start() :])
            dollar_end = text
            out.append(text)
        elif kind == "string":
            if not allow_literals:
                raise _literal(where, database, text)
            out.append(_escaped(text))
        elif kind == "quoted" and text[0] == '"' and backend in _DOUBLE_QUOTED_STRINGS:
            if not allow_literals:
                raise _double_quoted(where, database, text, _DOUBLE_QUOTED_STRINGS[backend])
            out.append(_escaped(text))
        elif kind in ("comment", "quoted"):
            out.append(_escaped(text))
        elif kind == "named":
            names.append(token.group("name"))
            out.append(text)
        elif kind == "qmark":
            marks += 1
            out.append(f":_{marks}")
        elif kind == "format":
            raise InvalidSQL(
                f"{where}: {text} is a driver's placeholder; write :name (args a dict) or "
                "? (args a list)",
                database=database,
            )
        elif kind == "brace":
            raise InvalidSQL(
                f"{where}: {text} looks like a template placeholder left in the SQL; pass "
                "the value in args with :name or ?",
                database=database,
            )
        elif kind == "end":
            if sql[position:].strip():
                raise InvalidSQL(
                    f"{where}: one statement per step; the SQL goes on after ';'",
                    database=database,
                )
            out.append(text)
        else:  # a cast (::), which is no placeholder
            out.append(text)
    out.append(sql[position:])
    if names and marks:
        raise InvalidSQL(f"{where}: use :name or ? placeholders, not both", database=database)
    params = _params(where, database, names, marks, args)
    return Bound("".join(out), params)


def _params(where: str, database: str, names: list[str], marks: int, args: Any) -> dict[str, Any]:
    """The parameters by placeholder name; InvalidSQL when they do not fit the SQL."""
    if marks:
        if not isinstance(args, Sequence) or isinstance(args, str | bytes):
            raise InvalidSQL(
                f"{where}: the SQL has {marks} ? placeholder(s); give args as a list",
                database=database,
            )
        if len(args) != marks:
            raise InvalidSQL(
                f"{where}: the SQL has {marks} ? placeholder(s) but args has {len(args)} value(s)",
                database=database,
            )
        return {f"_{n}": value for n, value in enumerate(args, start=1)}
    if names:
        if not isinstance(args, Mapping):
            raise InvalidSQL(
                f"{where}: the SQL has :name placeholders ({', '.join(dict.fromkeys(names))}); "
                "give args as a dict",
                database=database,
            )
        missing = [name for name in dict.fromkeys(names) if name not in args]
        if missing:
            raise InvalidSQL(
                f"{where}: no value in args for :{', :'.join(missing)}", database=database
            )
        unused = [str(key) for key in args if key not in names]
        if unused:
            raise InvalidSQL(
                f"{where}: args has {', '.join(unused)} that the SQL does not use",
                database=database,
            )
        return dict(args)
    if args:
        raise InvalidSQL(
            f"{where}: args given but the SQL has no placeholder (:name or ?)",
            database=database,
        )
    return {}


def _escaped(text: str) -> str:
    """`text` with its colons escaped, so that text() binds nothing inside it."""
    return text.replace(":", "\\:")


def _double_quoted(where: str, database: str, text: str, reading: str) -> InvalidSQL:
    shown = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
    return InvalidSQL(
        f"{where}: the SQL holds {shown}, and {reading}; pass values in args (:name or ?) "
        "and quote names with backticks (`name`), or allow_literals=True",
        database=database,
    )


def _literal(where: str, database: str, text: str) -> InvalidSQL:
    shown = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
    return InvalidSQL(
        f"{where}: the SQL holds the string literal {shown}; pass values in args (:name or "
        "?), or allow_literals=True for a constant",
        database=database,
    )
