"""The task form: a JSON Schema (or pydantic model) as fields, and posted fields as values."""

from __future__ import annotations

import json
from enum import StrEnum

import pydantic
import pytest

from cairn.authoring import forms
from cairn.dashboard.ui import schema_form
from cairn.dashboard.ui.schema_form import PREFIX
from cairn.errors import InvalidSubmission


class Size(StrEnum):
    S = "s"
    L = "l"


class Address(pydantic.BaseModel):
    city: str
    zip: str | None = None


class Order(pydantic.BaseModel):
    quantity: int = pydantic.Field(ge=1, description="how many")
    size: Size
    gift: bool = False
    address: Address
    tags: list[str] = []
    price: float | None = None


def widgets(fields):
    return {f.name: f.widget for f in schema_form._all(fields).values()}


def test_build__a_pydantic_models_schema_with_refs_and_optionals():
    fields, leftover = schema_form.build(Order.model_json_schema())
    assert leftover == []
    assert widgets(fields) == {
        "quantity": "integer",
        "size": "select",
        "gift": "checkbox",
        "address": "group",
        "address.city": "text",
        "address.zip": "text",
        "tags": "json",
        "price": "number",
    }
    by_name = schema_form._all(fields)
    assert by_name["quantity"].required and by_name["quantity"].minimum == 1
    assert by_name["quantity"].hint == "how many"
    assert by_name["size"].options == [('"s"', "s"), ('"l"', "l")]
    assert by_name["tags"].value == "[]"  # the default, as JSON
    assert by_name["gift"].value is False


def test_parse__values_by_type_and_empty_inputs_left_out():
    schema = Order.model_json_schema()
    form = {
        PREFIX + "quantity": "3",
        PREFIX + "size": '"l"',
        PREFIX + "gift": "true",
        PREFIX + "address.city": "Ghent",
        PREFIX + "address.zip": "",
        PREFIX + "tags": '["a", "b"]',
        PREFIX + "price": "9.5",
        "by": "ann",
    }
    values, problems = schema_form.parse(schema, form)
    assert problems == {}
    assert values == {
        "quantity": 3,
        "size": "l",
        "gift": True,
        "address": {"city": "Ghent"},
        "tags": ["a", "b"],
        "price": 9.5,
    }
    Order.model_validate(values)
    unchecked, _ = schema_form.parse(schema, {PREFIX + "size": '"s"'})
    # An unchecked box is false; a required group stays, so its own fields are reported.
    assert unchecked == {"size": "s", "gift": False, "address": {}}


def test_parse__text_where_a_number_goes_and_bad_json_are_reported():
    schema = Order.model_json_schema()
    values, problems = schema_form.parse(
        schema, {PREFIX + "quantity": "many", PREFIX + "tags": "[oops"}
    )
    assert values["quantity"] == "many"  # for the form's own check to name
    assert "tags" not in values
    assert problems["tags"].startswith("not valid JSON")


def test_parse__deeply_nested_json_is_a_problem_not_a_crash():
    deep = "[" * 100_000 + "]" * 100_000
    values, problems = schema_form.parse(
        Order.model_json_schema(), {PREFIX + "tags": deep, PREFIX + "size": deep}
    )
    assert problems["tags"] == "not valid JSON: nested more than 100 deep"
    assert values["size"] == deep  # a choice that is not JSON stays text, for the check to name
    _, problems = schema_form.parse(None, {PREFIX + "values": '{"n": 1e400}'})
    assert problems["values"] == "not valid JSON: number 1e400 is out of range"


def test_build__errors_land_beside_their_fields_or_on_the_form():
    schema = Order.model_json_schema()
    raw = {PREFIX + "quantity": "0"}
    errors = {
        "quantity": "0 is less than the minimum of 1",
        "address": "'city' is a required property",
        "tags.2": "1 is not of type 'string'",
        "(form)": "values must be a JSON object",
        "ghost": "no such field",
    }
    fields, leftover = schema_form.build(schema, raw, errors)
    by_name = schema_form._all(fields)
    assert by_name["quantity"].error == "0 is less than the minimum of 1"
    assert by_name["quantity"].value == "0"  # what was typed stays
    assert by_name["address.city"].error == "required"
    assert by_name["tags"].error == "1 is not of type 'string'"
    assert leftover == ["values must be a JSON object", "ghost: no such field"]


def test_no_schema__one_json_object_box():
    fields, _ = schema_form.build(None)
    assert [(f.name, f.widget) for f in fields] == [("values", "json")]
    values, problems = schema_form.parse(None, {PREFIX + "values": '{"ok": true}'})
    assert (values, problems) == ({"ok": True}, {})


def test_a_reference_cycle_does_not_hang():
    schema = {
        "type": "object",
        "properties": {"loop": {"$ref": "#/$defs/a"}},
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
    }
    fields, _ = schema_form.build(schema)
    assert fields[0].widget == "json"


def test_validate__names_every_missing_field_of_a_nested_object() -> None:
    schema = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "address": {
                "type": "object",
                "required": ["street", "city", "zip"],
                "properties": {k: {"type": "string"} for k in ("street", "city", "zip")},
            },
        },
    }

    with pytest.raises(InvalidSubmission) as caught:
        forms.validate({"address": {"city": 5}}, json.dumps(schema), None)

    assert caught.value.fields == {
        "name": "required",
        "address.street": "required",
        "address.city": "5 is not of type 'string'",
        "address.zip": "required",
    }
