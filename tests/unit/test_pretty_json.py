"""The JSON the dashboard shows people, and the JSON the CLI and API answer with."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

from cairn.dashboard.ui.render import WIDTH, pretty
from cairn.representation import json_form


def test_pretty__what_fits_stays_on_one_line_the_rest_is_indented() -> None:
    line = {"sku": "SKU-1", "qty": 3}
    order = {"lines": [line] * 6, "note": "leave at the door"}

    assert pretty(line) == '{"sku": "SKU-1", "qty": 3}'
    text = pretty(order)
    assert len(json.dumps(order)) > WIDTH
    assert text.splitlines()[:4] == ["{", '  "lines": [', "    {", '      "sku": "SKU-1",']
    assert json.loads(text) == order
    assert pretty([]) == "[]" and pretty({}) == "{}" and pretty("x" * 200) == json.dumps("x" * 200)


def test_pretty__rich_values_as_the_cli_shows_them() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    shown = json.loads(pretty({"at": moment, "price": Decimal("1.10"), "bad": float("nan")}))

    assert shown == {"at": "2026-01-02T03:04:05+00:00", "price": "1.10", "bad": None}


def test_dumps__the_fast_path_answers_what_jsonable_would() -> None:
    values = [
        {"a": [1, 2.5, None, True], "b": {"c": "ü"}},
        {"at": datetime(2026, 1, 2, tzinfo=UTC), "tuple": (1, 2), "set": {3, 1}},
        {"nan": float("nan"), "inf": float("inf")},  # the fallback: NaN is not JSON
        {1: "int key"},
    ]
    for value in values:
        assert json_form.dumps(value, indent=None) == json.dumps(
            json_form.jsonable(value), ensure_ascii=False
        )
