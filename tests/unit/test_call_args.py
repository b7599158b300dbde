"""`cairn run`'s ARGs and --input: read and checked by the CLI, converted once by engine.start."""

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


def test_parse_call__values_as_read_for_engine_start_to_convert():
    args, kwargs = call_args.parse_call(
        ORDER, ['{"sku": "a", "price": "1.50"}', "59.90"], '{"count": 2}'
    )
    # Read, not converted: the dataclass is still its JSON object, and the one conversion
    # (engine.start's) makes it an Item.
    assert args == [{"sku": "a", "price": "1.50"}, Decimal("59.90")]
    assert kwargs == {"count": 2}
    fitted, _ = arguments.fit(order, args, kwargs, workflow="order")
    assert fitted == (Item("a", Decimal("1.50")), Decimal("59.90"))


def test_parse_call__a_value_that_will_not_convert_is_bad_usage_now():
    with pytest.raises(options.UsageError) as caught:
        call_args.parse_call(ORDER, ['{"sku": "a", "price": "1.50"}', "lots"], None)
    with pytest.raises(Exception) as direct:
        arguments.fit(order, [{"sku": "a", "price": "1.50"}, "lots"], {}, workflow="order")
    assert str(caught.value) == str(direct.value)
