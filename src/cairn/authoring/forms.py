"""Human-task forms and hook payload schemas: a JSON Schema object or a pydantic model.

How they are stored, and validation against them.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from cairn.errors import InvalidArguments, InvalidSubmission, InvalidValue


def describe_form(form: Any, *, what: str = "human_task form") -> tuple[str | None, str | None]:
    """(JSON Schema text, model path) for a form given as a dict or a pydantic model class.

    `what` names the argument in the TypeError or ValueError a bad form raises.
    """
    if form is None:
        return None, None
    if isinstance(form, dict):
        try:
            return json.dumps(form, sort_keys=True), None
        except (TypeError, ValueError) as exc:
            raise InvalidValue(f"{what} is not a JSON Schema object: {exc}") from exc
    if isinstance(form, type) and hasattr(form, "model_json_schema"):
        schema = form.model_json_schema()
        return json.dumps(schema, sort_keys=True), f"{form.__module__}:{form.__qualname__}"
    raise InvalidArguments(f"{what} must be a JSON Schema dict or a pydantic model, got {form!r}")


def load_model(path: str | None) -> Any:
    """The pydantic model class at `module:qualname`, or None if it cannot be imported."""
    if not path:
        return None
    module_name, _, qualname = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return None
    return target


def validate(
    values: Any, schema_text: str | None, model_path: str | None, *, whole: str = "(form)"
) -> Any:
    """Check submitted `values` against the form; InvalidSubmission lists the bad fields.

    A problem with the value as a whole (not one field) is listed under `whole`. The model
    is used when it can be imported here, else its JSON Schema (a dashboard process need
    not import the workflows' modules).

    Returns the values as they will be stored (plain JSON values).
    """
    model = load_model(model_path)
    if model is not None:
        try:
            instance = model.model_validate(values)
        except Exception as exc:
            errors = getattr(exc, "errors", None)
            if not callable(errors):
                raise InvalidSubmission(fields={whole: str(exc)}) from None
            fields = {
                ".".join(str(p) for p in err.get("loc", ())) or whole: err.get("msg", "")
                for err in errors()
            }
            raise InvalidSubmission(fields=fields) from None
        return instance.model_dump(mode="json")
    if schema_text is None:
        return values
    schema = json.loads(schema_text)
    import jsonschema  # type: ignore[import-untyped]

    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(validator.iter_errors(values), key=lambda e: list(e.path))
    if problems:
        found: dict[str, str] = {}
        for err in problems:
            where = ".".join(str(p) for p in err.path)
            if err.validator == "required" and isinstance(err.validator_value, list):
                # Its path is the object's, not the missing field's: name each such field.
                given = err.instance if isinstance(err.instance, dict) else {}
                for name in err.validator_value:
                    if name not in given:
                        found.setdefault(f"{where}.{name}" if where else str(name), "required")
                continue
            found.setdefault(where or whole, err.message)
        raise InvalidSubmission(fields=found)
    return values
