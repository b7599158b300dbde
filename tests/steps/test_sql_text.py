"""The SQL check of cairn.steps.db: values bound, never written into the text."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.steps import InvalidSQL
from cairn.steps.sql_text import Bound, bind


def check(sql: Any, args: Any = None, *, allow_literals: bool = False) -> Bound:
    return bind(sql, args, database="app", what="db.query", allow_literals=allow_literals)


def test_sql__named_placeholders() -> None:
    bound = check("SELECT * FROM t WHERE a = :a AND b > :b OR a = :a", {"a": 1, "b": 2})
    assert bound == Bound("SELECT * FROM t WHERE a = :a AND b > :b OR a = :a", {"a": 1, "b": 2})


def test_sql__question_marks_become_named() -> None:
    bound = check("INSERT INTO t VALUES (?, ?)", ("x", None))
    assert bound == Bound("INSERT INTO t VALUES (:_1, :_2)", {"_1": "x", "_2": None})


def test_sql__no_placeholders_no_args() -> None:
    assert check("SELECT count(*) FROM t WHERE n > 10;", []) == Bound(
        "SELECT count(*) FROM t WHERE n > 10;", {}
    )


def test_sql__casts_quoted_names_and_comments_are_no_placeholders() -> None:
    sql = 'SELECT x::int, "we?ird:name", `b?`, t.a$1 FROM t -- is it? :no\nWHERE y = :y /* ? :z */'
    bound = check(sql, {"y": 1})
    assert bound.params == {"y": 1}
    assert "\\:no" in bound.sql and "\\:z" in bound.sql and "x::int" in bound.sql


def test_sql__literals_allowed_keep_their_colons_and_marks() -> None:
    bound = check("SELECT '12:30', 'why?' WHERE a = ?", [1], allow_literals=True)
    assert bound == Bound("SELECT '12\\:30', 'why?' WHERE a = :_1", {"_1": 1})
    dollar = check("SELECT $$a :b ? c$$, :x", {"x": 1}, allow_literals=True)
    assert dollar.params == {"x": 1} and "\\:b" in dollar.sql


@pytest.mark.parametrize(
    ("sql", "args", "error"),
    [
        (b"SELECT 1", None, "sql must be a string, got bytes"),
        (None, None, "sql must be a string, got NoneType"),
        ("  ", None, "sql is empty"),
        ("SELECT * FROM t WHERE name = 'bob'", None, "the SQL holds the string literal 'bob'"),
        ("SELECT * FROM t WHERE name = E'b\\'ob'", None, "string literal E'b\\'ob'"),
        ("SELECT $$bob$$", None, "string literal $$bob$$"),
        ("SELECT * FROM t WHERE a = %s", [1], "%s is a driver's placeholder"),
        ("SELECT * FROM t WHERE a = %(a)s", {"a": 1}, "%(a)s is a driver's placeholder"),
        ("SELECT * FROM t WHERE a = :1", [1], ":1 is a driver's placeholder"),
        ("SELECT * FROM t WHERE a = $1", [1], "$1 is a driver's placeholder"),
        ("SELECT * FROM t WHERE a = {a}", None, "{a} looks like a template placeholder"),
        ("DELETE FROM a; DELETE FROM b", None, "one statement per step"),
        ("SELECT :a, ?", {"a": 1}, "use :name or ? placeholders, not both"),
        ("SELECT ?, ?", [1], "2 ? placeholder(s) but args has 1 value(s)"),
        ("SELECT ?", {"a": 1}, "give args as a list"),
        ("SELECT :a", [1], "give args as a dict"),
        ("SELECT :a", None, "give args as a dict"),
        ("SELECT :a, :b", {"a": 1}, "no value in args for :b"),
        ("SELECT :a", {"a": 1, "c": 2}, "args has c that the SQL does not use"),
        ("SELECT 1", [1], "args given but the SQL has no placeholder"),
        ("SELECT ?", "1", "args must be a dict (for :name), a list (for ?) or None, got str"),
        ("SELECT ?", 1, "got int"),
    ],
)
def test_sql__refused(sql: Any, args: Any, error: str) -> None:
    with pytest.raises(InvalidSQL) as raised:
        check(sql, args)
    message = str(raised.value)
    assert message.startswith("db.query('app'): ") and error in message
    assert raised.value.database == "app" and "\n" not in message


def test_sql__a_long_literal_is_shortened() -> None:
    with pytest.raises(InvalidSQL, match=r"literal 'aaaaa[a]*\.\.\.;"):
        check("SELECT '" + "a" * 100 + "'")


@pytest.mark.parametrize("backend", ["sqlite", "mysql", "mariadb"])
def test_sql__double_quotes_are_a_literal_where_the_backend_reads_a_string(backend: str) -> None:
    sql = 'SELECT * FROM t WHERE name = "bob"'
    with pytest.raises(InvalidSQL, match=r'^db.query\(\'app\'\): the SQL holds "bob", and '):
        bind(sql, None, database="app", what="db.query", backend=backend)
    allowed = bind(sql, None, database="app", what="db.query", backend=backend, allow_literals=True)
    assert allowed.sql == sql
    named = "SELECT `we?ird:name`, [x] FROM t WHERE a = :a"
    assert bind(named, {"a": 1}, database="app", what="db.query", backend=backend).params == {
        "a": 1
    }


@pytest.mark.parametrize("backend", ["postgresql", None])
def test_sql__double_quotes_are_a_name_elsewhere(backend: str | None) -> None:
    sql = 'SELECT "Order Total" FROM t WHERE a = :a'
    assert bind(sql, {"a": 1}, database="app", what="db.query", backend=backend).sql == sql
