"""PostgreSQL only: bulk columns encoded as binary arrays read back exactly."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cairn.store.postgres import binary_arrays


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as connection:
        yield connection


COLUMNS: list[tuple[str, list[Any]]] = [
    ("text", ["", "plain", "ünïcødé ✓ 𝄞", "quote ' \" \\ {a,b}", None, "NULL"]),
    ("integer", [0, 1, -1, 2**31 - 1, -(2**31), None]),
    ("bigint", [0, 2**63 - 1, -(2**63), None, 7, -7]),
    ("double precision", [0.0, -0.0, 1.7e9 + 0.123456, 1e-300, math.inf, None]),
    ("boolean", [True, False, None, True, False, True]),
]


@pytest.mark.parametrize(("kind", "values"), COLUMNS, ids=[kind for kind, _ in COLUMNS])
def test_encode__each_type_reads_back_exactly(
    conn: psycopg.Connection[Any], kind: str, values: list[Any]
) -> None:
    [column] = binary_arrays.encode([kind], [(value,) for value in values]) or [None]
    assert column is not None

    rows = conn.execute(f"SELECT unnest(%b::{kind}[])", [column]).fetchall()

    assert [row[0] for row in rows] == values


def test_encode__a_whole_row_of_columns(conn: psycopg.Connection[Any]) -> None:
    kinds = [kind for kind, _ in COLUMNS]
    rows = list(zip(*(values for _, values in COLUMNS), strict=True))
    columns = binary_arrays.encode(kinds, rows)
    assert columns is not None

    placeholders = ", ".join(f"%b::{kind}[]" for kind in kinds)
    read = conn.execute(f"SELECT * FROM unnest({placeholders})", columns).fetchall()

    assert read == rows


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("text", 5),  # not a string
        ("text", "\ud800"),  # a lone surrogate
        ("integer", 2**31),  # out of range
        ("integer", 1.5),
        ("integer", True),  # psycopg would send a boolean
        ("bigint", "7"),
        ("double precision", "1.0"),
        ("double precision", False),
        ("boolean", 1),  # psycopg would send a number
        ("numeric", 1),  # a type this does not encode
    ],
)
def test_encode__a_value_that_does_not_fit_leaves_it_to_psycopg(kind: str, value: Any) -> None:
    assert binary_arrays.encode([kind], [(value,)]) is None


def test_encodable__only_the_types_it_knows() -> None:
    assert binary_arrays.encodable(["text", "integer", "double precision"])
    assert not binary_arrays.encodable(["text", "jsonb"])
