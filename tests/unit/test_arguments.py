"""Fitting a start's arguments to a signature, and converting values to annotated types."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal, NamedTuple, NewType, Optional

import pydantic
import pytest

from cairn import arguments, conversion
from cairn.errors import InvalidArguments

OrderId = NewType("OrderId", str)


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


class Point(NamedTuple):
    x: Decimal
    y: Decimal


@dataclasses.dataclass
class Item:
    sku: str
    price: Decimal
    added: date | None = None
    note: str = dataclasses.field(default="", init=False)


class Box(pydantic.BaseModel):
    width: Decimal
    items: list[Item] = []


@pytest.mark.parametrize(
    ("value", "hint", "expected"),
    [
        (59.9, Decimal, Decimal("59.9")),
        (59.90, Decimal, Decimal("59.9")),
        ("59.90", Decimal, Decimal("59.90")),
        (7, Decimal, Decimal(7)),
        ("2024-05-01", date, date(2024, 5, 1)),
        ("2024-05-01T10:00:00Z", datetime, datetime.fromisoformat("2024-05-01T10:00:00+00:00")),
        ("10:30", time, time(10, 30)),
        ("1h30m", timedelta, timedelta(hours=1, minutes=30)),
        (90, timedelta, timedelta(seconds=90)),
        (
            "12345678-1234-5678-1234-567812345678",
            uuid.UUID,
            uuid.UUID(int=0x12345678123456781234567812345678),
        ),
        (2, Size, Size.LARGE),
        ("LARGE", Size, Size.LARGE),
        ("o-1", OrderId, "o-1"),
        ("1.5", Annotated[Decimal, "money"], Decimal("1.5")),
        (None, Optional[Decimal], None),  # noqa: UP045
        ("1.5", Decimal | None, Decimal("1.5")),
        ("x", str | Decimal, "x"),  # fits a member as it is: left alone
        (1.5, int | Decimal, Decimal("1.5")),
        ("a", Literal["a", "b"], "a"),
        ([1, 2], tuple[int, ...], (1, 2)),
        (["1", "2"], set[Decimal], {Decimal(1), Decimal(2)}),
        (["1"], frozenset[Decimal], frozenset({Decimal(1)})),
        (("1", "2"), list[Decimal], [Decimal(1), Decimal(2)]),
        ([1, "x"], tuple[int, str], (1, "x")),
        ({"a": "1"}, dict[str, Decimal], {"a": Decimal(1)}),
        ({"a": "1"}, Mapping[str, Decimal], {"a": Decimal(1)}),
        (["1"], Sequence[Decimal], [Decimal(1)]),
        ("abc", Sequence[str], "abc"),
        (["1", "2"], Point, Point(Decimal(1), Decimal(2))),
        ({"x": "1", "y": 2}, Point, Point(Decimal(1), Decimal(2))),
        ([1, 2], tuple, (1, 2)),
        (True, int, True),  # a bool is an int to Python
        (3, float, 3),  # and an int a float
        ({"any": object}, Any, {"any": object}),
    ],
)
def test_convert__plain_values_to_their_annotated_types(
    value: Any, hint: Any, expected: Any
) -> None:
    converted = conversion.convert(value, hint)
    assert converted == expected
    assert type(converted) is type(expected)


def test_convert__dicts_to_dataclasses_and_models_field_by_field() -> None:
    item = conversion.convert({"sku": "a", "price": 1.25, "added": "2024-01-02"}, Item)
    box = conversion.convert({"width": "2.5", "items": [{"sku": "b", "price": "3"}]}, Box)

    assert item == Item("a", Decimal("1.25"), date(2024, 1, 2))
    assert box == Box(width=Decimal("2.5"), items=[Item("b", Decimal(3))])
    assert conversion.convert(item, Item) is item  # already of the type: untouched


@pytest.mark.parametrize(
    ("value", "hint", "where", "reason"),
    [
        ("12,5", Decimal, "", "not a decimal number"),
        ("NaN", Decimal, "", ""),
        (True, Decimal, "", ""),
        (1.5, str, "", ""),
        ("5", int, "", ""),
        ("soon", date, "", "Invalid isoformat string"),
        ("MEDIUM", Size, "", "not one of 1, 2"),
        ("c", Literal["a", "b"], "", ""),
        ([1, 2, 3], tuple[int, int], "", "3 items, expected 2"),
        ([1, "x"], list[int], "[1]", ""),
        ({"a": "x"}, dict[str, Decimal], "['a']", "not a decimal number"),
        ({"sku": "a"}, Item, "", "missing 1 required positional argument: 'price'"),
        ({"sku": "a", "price": 1, "note": "n"}, Item, "", "unknown field 'note'"),
        ({"sku": "a", "price": "x"}, Item, ".price", "not a decimal number"),
        ({"width": "wide"}, Box, "", "width: Input should be a valid decimal"),
        ("x", int | Decimal, "", ""),
        ({"a": 1}, list[int], "", ""),
    ],
)
def test_convert__what_does_not_fit_is_a_misfit_naming_where(
    value: Any, hint: Any, where: str, reason: str
) -> None:
    with pytest.raises(conversion.Misfit) as caught:
        conversion.convert(value, hint)
    assert "".join(reversed(caught.value.where)) == where
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("hint", "text"),
    [
        (Decimal, "Decimal"),
        (list[uuid.UUID], "list[UUID]"),
        (Decimal | None, "Decimal | None"),
        (Optional[date], "date | None"),  # noqa: UP045
        (tuple[int, ...], "tuple[int, ...]"),
        (dict[str, Item], "dict[str, Item]"),
        (Literal["a", 1], "Literal['a', 1]"),
        (Annotated[int, "x"], "int"),
    ],
)
def test_describe__types_as_people_write_them(hint: Any, text: str) -> None:
    assert conversion.describe(hint) == text


def order(order_id: str, amount: Decimal, /, due: date | None = None, *, note: str = "") -> None:
    """A workflow body: positional-only, defaulted and keyword-only parameters."""


def spread(first: int, *rest: Decimal, **extra: date) -> None:
    """Variadic parameters: each extra value is converted to the starred annotation."""


def test_fit__keeps_positional_and_keyword_arguments_where_they_were_given() -> None:
    args, kwargs = arguments.fit(order, ["o-1", "1.5"], {"due": "2024-05-01"}, workflow="w")
    assert args == ("o-1", Decimal("1.5"))
    assert kwargs == {"due": date(2024, 5, 1)}
    args, kwargs = arguments.fit(spread, [1, "2", 3.5], {"on": "2024-01-01"}, workflow="w")
    assert args == (1, Decimal(2), Decimal("3.5"))
    assert kwargs == {"on": date(2024, 1, 1)}


@pytest.mark.parametrize(
    ("args", "kwargs", "message", "parameter"),
    [
        (["o-1"], {}, "missing a required argument: 'amount'", "amount"),
        (["o-1", 1, None, 2], {}, "too many positional arguments", ""),
        (
            ["o-1", 1],
            {"run_at": 1},
            "unexpected keyword argument 'run_at' (a start's own",
            "run_at",
        ),
        ([], {"order_id": "o", "amount": 1}, "positional only", "order_id"),
        (["o-1", 1], {"note": 5}, "argument 'note': expected str, got 5 (int)", "note"),
        (
            ["o-1", "x"],
            {},
            "argument 'amount': expected Decimal, got 'x' (str): not a decimal",
            "amount",
        ),
    ],
)
def test_fit__refuses_what_does_not_fit_naming_the_workflow_and_parameter(
    args: list[Any], kwargs: dict[str, Any], message: str, parameter: str
) -> None:
    with pytest.raises(InvalidArguments) as caught:
        arguments.fit(order, args, kwargs, workflow="shop.order", reserved=("run_id",))
    assert message in str(caught.value)
    assert "workflow 'shop.order'" in str(caught.value)
    assert caught.value.parameter == parameter
    assert isinstance(caught.value, TypeError)


def test_fit__the_signature_is_shown_with_types_as_people_write_them() -> None:
    with pytest.raises(InvalidArguments) as caught:
        arguments.fit(order, [], {}, workflow="w")
    assert "(order_id: str, amount: Decimal, /, due: date | None = None, *, note: str = '')" in str(
        caught.value
    )


def test_fit__none_passes_for_a_parameter_whose_default_is_none() -> None:
    def loose(x: str = None) -> None:  # type: ignore[assignment]  # noqa: RUF013
        """Old style: None without Optional."""

    assert arguments.fit(loose, [None], {}, workflow="w") == ((None,), {})


def test_hint_of__the_type_each_argument_goes_to() -> None:
    assert arguments.hint_of(order, position=1) is Decimal
    assert arguments.hint_of(order, position=2) == date | None
    assert arguments.hint_of(order, position=3) is Any
    assert arguments.hint_of(order, name="note") is str
    assert arguments.hint_of(order, name="order_id") is Any  # positional-only
    assert arguments.hint_of(spread, position=5) is Decimal
    assert arguments.hint_of(spread, name="anything") is date


@pytest.mark.parametrize(
    ("text", "hint", "expected"),
    [
        ("59.90", Decimal, Decimal("59.90")),
        ("00123", str, "00123"),
        ("42", str, "42"),
        ('"o-1"', str, "o-1"),
        ("2024-05-01", date | None, date(2024, 5, 1)),
        ("LARGE", Size, Size.LARGE),
    ],
)
def test_from_text__types_that_read_text_read_it_as_typed(
    text: str, hint: Any, expected: Any
) -> None:
    found = arguments.from_text(text, hint)
    assert found == expected and type(found) is type(expected)


@pytest.mark.parametrize(
    ("text", "hint"), [("42", int), ('"59.90"', Decimal), ("[1]", list[int]), ("x", Any)]
)
def test_from_text__other_types_are_read_the_usual_way(text: str, hint: Any) -> None:
    assert arguments.from_text(text, hint) is arguments.NOTHING
