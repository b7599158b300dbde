"""One MCP tool: its name, description and argument schema, and the call behind it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from cairn.runtime.control import RunControl

Call = Callable[[RunControl, dict[str, Any]], Awaitable[Any]]
"""A tool's work: the control and the checked arguments in, JSON values out."""

MCP = "mcp"
"""Who asks, recorded in a run's history when a call does not say (`by`)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One MCP tool: what `tools/list` shows of it and what `tools/call` does."""

    name: str
    """The tool's name: the verb's method name, or a read's (`list_runs`)."""
    description: str
    """What it does, for the agent choosing a tool."""
    schema: dict[str, Any]
    """The JSON Schema of its arguments (an object)."""
    call: Call
    """Does it, with arguments already checked against `schema`; returns JSON values."""

    def check(self, arguments: dict[str, Any]) -> str | None:
        """What is wrong with `arguments`, naming the argument; None if they fit."""
        validator = jsonschema.Draft202012Validator(self.schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        if error.validator == "required":
            missing = next((n for n in error.validator_value if n not in arguments), "?")
            return f"{self.name}: missing required argument {missing!r}"
        if error.validator == "additionalProperties":
            known = set(self.schema.get("properties", {}))
            extra = sorted(set(arguments) - known)
            return (
                f"{self.name}: unknown argument {extra[0]!r} (it takes "
                f"{', '.join(sorted(known)) or 'none'})"
            )
        where = error.absolute_path[0] if error.absolute_path else "arguments"
        return f"{self.name}: argument {where!r}: {error.message}"
