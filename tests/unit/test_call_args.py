"""`cairn run`'s ARGs and --input: read, checked and converted once, by the CLI."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from cairn import arguments
from cairn.authoring.definitions import WorkflowDef
from cairn.cli import call_args, options


@dataclasses.dataclass
class Item:
    sku: str
    price: Decimal


async def order(item: Item, total: Decimal, count: int = 1) -> None:
    pass


ORDER = WorkflowDef("order", order, None, None, None, None, 8, True)


def test_parse_call__values_converted_to_the_parameters_types():
    args, kwargs = call_args.parse_call(
        ORDER, ['{"sku": "a", "price": "1.50"}', "59.90"], '{"count": 2}'
    )
    assert args == [Item("a", Decimal("1.50")), Decimal("59.90")]
    assert kwargs == {"count": 2}


MADE: list[int] = []


@dataclasses.dataclass
class Counted:
    n: int

    def __post_init__(self) -> None:
        MADE.append(self.n)


async def counted(item: Counted, more: list[Counted]) -> None:
    pass


def test_parse_call__converts_once_and_engine_start_leaves_the_values_as_they_are():
    expected = ([Counted(1)], {"more": [Counted(2)]})
    MADE.clear()
    args, kwargs = call_args.parse_call(
        WorkflowDef("counted", counted, None, None, None, None, 8, True),
        ['{"n": 1}'],
        '{"more": [{"n": 2}]}',
    )
    assert MADE == [1, 2]  # each value made once: no dry run made and dropped them before
    MADE.clear()
    # What engine.start does with them: they fit, so nothing is converted again.
    fitted_args, fitted_kwargs = arguments.fit(counted, args, kwargs, workflow="counted")
    assert fitted_args[0] is args[0] and fitted_kwargs["more"][0] is kwargs["more"][0]
    assert MADE == []
    assert (args, kwargs) == expected


def test_parse_call__a_value_that_will_not_convert_is_bad_usage_now():
    with pytest.raises(options.UsageError) as caught:
        call_args.parse_call(ORDER, ['{"sku": "a", "price": "1.50"}', "lots"], None)
    with pytest.raises(Exception) as direct:
        arguments.fit(order, [{"sku": "a", "price": "1.50"}, "lots"], {}, workflow="order")
    assert str(caught.value) == str(direct.value)
