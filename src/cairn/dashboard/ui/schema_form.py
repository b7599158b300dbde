"""A human task's JSON Schema as an HTML form, and the posted fields back as values.

Strings, numbers, integers, booleans (a checkbox), enums (a select) and nested objects (a
fieldset) get their own inputs; anything else (arrays, free-form objects) is a JSON text
box. Fields are named by their dotted path (`address.city`), the same path the form's
validation (`cairn.InvalidSubmission.fields`) uses, so each error lands beside its field.
Checking the values stays with `TaskControl.submit`; this module only converts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.dashboard.api import strict_json

FORM_ERROR = "(form)"
PREFIX = "v."  # of the inputs' names, so a field named `by` or `csrf` cannot clash
NO_SCHEMA = "values"  # the one field of a task without a form: a JSON object
_FORMATS = {"date": "date", "email": "email", "uri": "url"}
_REQUIRED = re.compile(r"^'(.+)' is a required property$")


@dataclass(slots=True)
class Field:
    """One input (or fieldset) of the form."""

    name: str
    """Dotted path; the input's name."""
    label: str
    """What the person reads."""
    widget: str
    """text, email, date, url, textarea, integer, number, checkbox, select, group or json."""
    required: bool = False
    """True if the schema requires it."""
    hint: str = ""
    """The schema's description."""
    options: list[tuple[str, str]] = field(default_factory=list)
    """(value, label) of a select; values are JSON text."""
    children: list[Field] = field(default_factory=list)
    """The fields of a group."""
    value: Any = ""
    """The text to show again (a bool for a checkbox)."""
    error: str = ""
    """The problem with the last submitted value."""
    minimum: Any = None
    """Lower bound of a number, for the input's hint."""
    maximum: Any = None
    """Upper bound of a number, for the input's hint."""


def _resolve(spec: Any, root: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` with a local `$ref`, a lone `allOf` and a nullable `anyOf` unwrapped."""
    for _ in range(20):  # refs pointing at refs; a cycle stops here
        if not isinstance(spec, dict):
            return {}
        ref = spec.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            extra = {k: v for k, v in spec.items() if k != "$ref"}
            spec = {**target, **extra}
            continue
        for combo in ("allOf", "anyOf", "oneOf"):
            options = spec.get(combo)
            if isinstance(options, list):
                chosen = [
                    o for o in options if not (isinstance(o, dict) and o.get("type") == "null")
                ]
                if len(chosen) == 1:
                    rest = {k: v for k, v in spec.items() if k != combo}
                    base = chosen[0] if isinstance(chosen[0], dict) else {}
                    spec = {**base, **rest}
                    break
        else:
            return spec
    return spec if isinstance(spec, dict) else {}


def _kind(spec: Mapping[str, Any]) -> str | None:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def _label(name: str, spec: Mapping[str, Any]) -> str:
    title = spec.get("title")
    if isinstance(title, str) and title.strip():
        return title
    return name.replace("_", " ").capitalize()


def _widget(spec: Mapping[str, Any]) -> str:
    if "enum" in spec or "const" in spec:
        return "select"
    kind = _kind(spec)
    if kind == "boolean":
        return "checkbox"
    if kind in ("integer", "number"):
        return kind
    if kind == "string":
        fmt = spec.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS:
            return _FORMATS[fmt]
        long = spec.get("maxLength")
        return "textarea" if isinstance(long, int) and long > 200 else "text"
    if kind == "object" and isinstance(spec.get("properties"), dict):
        return "group"
    return "json"


def build(
    schema: Mapping[str, Any] | None,
    raw: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> tuple[list[Field], list[str]]:
    """The form's fields (with the last values and errors), and errors no field owns."""
    raw = raw if raw is not None else {}
    if not schema:
        only = Field(NO_SCHEMA, "Values (a JSON object)", "json", required=True)
        only.value = raw.get(PREFIX + NO_SCHEMA, "{}")
        fields = [only]
    else:
        fields = _fields(_resolve(schema, schema), schema, "", raw, initial=not raw)
    leftover = _place(fields, dict(errors or {}))
    return fields, leftover


def _fields(
    spec: Mapping[str, Any],
    root: Mapping[str, Any],
    prefix: str,
    raw: Mapping[str, str],
    *,
    initial: bool,
) -> list[Field]:
    properties = spec.get("properties")
    if not isinstance(properties, dict):
        return []
    required = set(spec.get("required") or ())
    found = []
    for name, child in properties.items():
        child = _resolve(child, root)
        path = f"{prefix}{name}"
        widget = _widget(child)
        item = Field(
            name=path,
            label=_label(str(name), child),
            widget=widget,
            required=name in required,
            hint=str(child.get("description") or ""),
            minimum=child.get("minimum"),
            maximum=child.get("maximum"),
        )
        default = child.get("default")
        if widget == "group":
            item.children = _fields(child, root, f"{path}.", raw, initial=initial)
        elif widget == "checkbox":
            item.value = bool(default) if initial else PREFIX + path in raw
        elif widget == "select":
            choices = child["enum"] if "enum" in child else [child["const"]]
            item.options = [(json.dumps(v), str(v)) for v in choices]
            picked = raw.get(PREFIX + path, "")
            if initial and default is not None:
                picked = json.dumps(default)
            item.value = picked
        elif initial:
            item.value = "" if default is None else _text(default, widget)
        else:
            item.value = raw.get(PREFIX + path, "")
        found.append(item)
    return found


def _text(value: Any, widget: str) -> str:
    if widget == "json" or not isinstance(value, str | int | float):
        return json.dumps(value)
    return str(value)


def _all(fields: list[Field]) -> dict[str, Field]:
    found: dict[str, Field] = {}
    for item in fields:
        found[item.name] = item
        found.update(_all(item.children))
    return found


def described(fields: list[Field]) -> list[tuple[str, str, str]]:
    """(input name, label, widget) of each input, for a form sent back unanswered.

    The widget is one the page that sends it back draws: checkbox, textarea or text.
    """
    found: list[tuple[str, str, str]] = []
    for item in fields:
        if item.widget == "group":
            found += described(item.children)
            continue
        widget = {"checkbox": "checkbox", "json": "textarea", "textarea": "textarea"}
        found.append((PREFIX + item.name, item.label, widget.get(item.widget, "text")))
    return found


def problems(fields: list[Field], parent: str = "") -> list[tuple[str, str, str]]:
    """(input id, label path, error) of every field with an error, in the form's order.

    The banner above the form lists them all, each a link to its field.
    """
    found = []
    for item in fields:
        label = f"{parent} / {item.label}" if parent else item.label
        if item.error:
            found.append((f"f-{item.name}", label, item.error))
        found.extend(problems(item.children, label))
    return found


def _place(fields: list[Field], errors: dict[str, str]) -> list[str]:
    """Put each error on its field (or the nearest enclosing one); return the rest."""
    by_name = _all(fields)
    leftover = []
    for where, message in errors.items():
        missing = _REQUIRED.match(message)
        if missing and f"{where}.{missing.group(1)}" in by_name:
            where, message = f"{where}.{missing.group(1)}", "required"
        path = where
        while path and path not in by_name:
            path = path.rpartition(".")[0]
        if path:
            target = by_name[path]
            target.error = f"{target.error}; {message}" if target.error else message
        else:
            leftover.append(message if where == FORM_ERROR else f"{where}: {message}")
    return leftover


def parse(schema: Mapping[str, Any] | None, form: Mapping[str, str]) -> tuple[Any, dict[str, str]]:
    """The values the posted fields stand for, and the fields that could not be read.

    Empty inputs are left out (so a required one is reported missing); a number that
    does not parse is passed on as text, for the form's check to name.
    """
    problems: dict[str, str] = {}
    if not schema:
        return _json(NO_SCHEMA, form.get(PREFIX + NO_SCHEMA, ""), problems) or {}, problems
    fields, _ = build(schema, form)
    return _collect(fields, form, problems), problems


def _collect(
    fields: list[Field], form: Mapping[str, str], problems: dict[str, str]
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in fields:
        key = item.name.rpartition(".")[2]
        if item.widget == "group":
            inner = _collect(item.children, form, problems)
            if inner or item.required:
                values[key] = inner
            continue
        if item.widget == "checkbox":
            values[key] = PREFIX + item.name in form
            continue
        text = form.get(PREFIX + item.name, "")
        if item.widget not in ("text", "textarea"):
            text = text.strip()
        if text == "":
            continue
        if item.widget == "select":
            try:
                values[key] = strict_json.loads(text)
            except ValueError:
                values[key] = text
        elif item.widget in ("integer", "number"):
            values[key] = _number(text)
        elif item.widget == "json":
            found = _json(item.name, text, problems)
            if item.name not in problems:
                values[key] = found
        else:
            values[key] = text
    return values


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "e" not in text.lower() else number


def _json(name: str, text: str, problems: dict[str, str]) -> Any:
    if not text.strip():
        return None
    try:
        return strict_json.loads(text)
    except ValueError as exc:
        problems[name] = f"not valid JSON: {exc}"
        return None
