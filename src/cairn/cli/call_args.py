"""A workflow's arguments typed on the command line, read and checked before anything is stored.

One path for `cairn run`, `cairn workflows run` and `cairn schedules create`: each ARG
and each `--arg NAME=VALUE` is read as its parameter's annotated type wants (`59.90` for
a `Decimal` stays `Decimal("59.90")`), else as JSON when it parses, else as the text;
the JSON object of keyword arguments (`--input`, `--args-json`) keeps the digits of a
number given to a `Decimal` parameter. They are converted here, once, by the conversion
`engine.start` (or `schedules.create`) applies, before anything opens (exit 2 if they do
not fit, and no database is made); `engine.start` gets the converted values, finds that
they fit and leaves them as they are.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from decimal import Decimal
from typing import Any

from cairn import arguments, conversion
from cairn.authoring.definitions import WorkflowDef
from cairn.cli import options
from cairn.errors import InvalidArguments
from cairn.runtime.control import START_OPTIONS


def parse_call(
    workflow: WorkflowDef[Any, Any] | str,
    texts: Sequence[str],
    input_json: str | None,
    *,
    reserved: Collection[str] = START_OPTIONS,
    named: Sequence[str] = (),
    input_flag: str = "--input",
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of ARGs, `--arg NAME=VALUE`s (`named`) and the JSON object `input_json`.

    Converted to the parameters' types when this process imports the workflow, as read
    (for its workers to convert) when it knows only its name.

    Raises:
        UsageError: (exit 2) arguments that do not fit, a keyword given twice, a key that
            is one of the `reserved` options (engine.start's own), or `input_json` that
            is not a JSON object (named as `input_flag`).
    """
    name = workflow.name if isinstance(workflow, WorkflowDef) else workflow
    fn = workflow.fn if isinstance(workflow, WorkflowDef) else None
    kwargs = {} if input_json is None else options.parse_object(input_json, what=input_flag)
    source = dict.fromkeys(kwargs, input_flag)  # where each keyword came from
    for item in named:
        key, value = _named(item)
        if key in source:
            twice = "twice with --arg" if source[key] == "--arg" else f"by --arg and {input_flag}"
            raise options.UsageError(f"argument {key!r} of workflow {name!r} is given {twice}")
        source[key] = "--arg"
        kwargs[key] = _read(value, Any if fn is None else arguments.hint_of(fn, name=key), key)
    clash = sorted(set(reserved) & kwargs.keys())
    if clash:
        raise options.UsageError(
            f"{source[clash[0]]} key {clash[0]!r} is reserved by engine.start; rename that "
            f"parameter of workflow {name!r}"
        )
    if fn is None:  # its signature is known only to its workers
        return [options.parse_argument(text, what="argument") for text in texts], kwargs
    args = [_read(text, arguments.hint_of(fn, position=i)) for i, text in enumerate(texts)]
    if input_json is not None:
        # Keep the digits of a JSON number given to a Decimal parameter: 59.90 stays 59.90.
        for key, value in json.loads(input_json, parse_float=Decimal).items():
            hint = conversion.optional_inner(arguments.hint_of(fn, name=key))
            if hint is Decimal and isinstance(value, Decimal):
                kwargs[key] = value
    try:
        fitted, kwargs = arguments.fit(fn, args, kwargs, workflow=name)
    except InvalidArguments as exc:
        raise options.UsageError(str(exc)) from None
    return list(fitted), kwargs


def _named(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise options.UsageError(f"--arg {item!r} is not NAME=VALUE (e.g. --arg order_id=o-1)")
    return key.strip(), value


def _read(text: str, hint: Any, key: str | None = None) -> Any:
    found = arguments.from_text(text, hint)
    if found is arguments.NOTHING:
        what = "argument" if key is None else f"--arg {key}"
        return options.parse_argument(text, what=what)
    return found
