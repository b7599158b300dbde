"""Every surface exposes each verb of `cairn.runtime.verbs.VERBS` with the same arguments.

The CLI, the HTTP API and the MCP tools are built from the table; Engine, TestEngine and Client are
written out (for mypy and IDEs), so these tests hold their signatures and docstrings to it.
"""

from __future__ import annotations

import argparse
import inspect
import re

import pytest

from cairn import Client, Engine
from cairn.cli import control
from cairn.cli.main import build_parser
from cairn.dashboard import api
from cairn.dashboard.api import verb_routes
from cairn.dashboard.api.replies import describe, status_for
from cairn.dashboard.ui import run as run_page
from cairn.errors import InvalidName, RunFinished, RunNotFound
from cairn.mcp_server import tools as mcp_tools
from cairn.runtime.control import RunControl
from cairn.runtime.run_verbs import RunVerbs
from cairn.runtime.verbs import VERBS, Verb
from cairn.testing import TestEngine

IDS = [verb.name for verb in VERBS]


def parameters(method) -> list[tuple[str, object, object, object]]:
    """(name, kind, default, annotation) of each argument after self."""
    found = inspect.signature(method).parameters.values()
    return [(p.name, p.kind, p.default, p.annotation) for p in found][1:]


def summary_line(method) -> str:
    """The first line of a method's docstring."""
    return (inspect.getdoc(method) or "").splitlines()[0]


def implementation(name: str):
    """The one implementation of verb `name`: on RunVerbs, or on RunControl itself."""
    return getattr(RunVerbs, name, None) or getattr(RunControl, name)


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__one_implementation_on_run_control(verb: Verb):
    method = implementation(verb.name)
    assert inspect.iscoroutinefunction(method)
    assert summary_line(method) == verb.summary + "."


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__the_declared_arguments_are_the_methods(verb: Verb):
    found = parameters(implementation(verb.name))
    assert [a.name for a in verb.arguments] == [name for name, *_ in found]
    optional = {name for name, _, default, _ in found if default is not inspect.Parameter.empty}
    assert {a.name for a in verb.arguments if not a.required} == optional


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
async def test_verbs__run_control_serves_each_from_its_implementation(verb: Verb):
    async with TestEngine() as engine:
        served = getattr(engine.control, verb.name)
        assert getattr(served, "__func__", served) is implementation(verb.name)


@pytest.mark.parametrize("surface", [Engine, TestEngine, Client], ids=lambda s: s.__name__)
@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__each_api_class_has_the_method_with_its_arguments(surface: type, verb: Verb):
    method = getattr(surface, verb.name, None)
    assert method is not None, f"{surface.__name__} has no {verb.name}"
    assert parameters(method) == parameters(implementation(verb.name))
    assert inspect.iscoroutinefunction(method) is (surface is not Client)
    assert summary_line(method) == verb.summary + "."


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__each_has_its_cli_command(verb: Verb):
    parser = build_parser()
    for word in verb.command.split():
        commands = subcommands(parser)
        assert word in commands, f"`cairn {verb.command}`: no {word!r} in {sorted(commands)}"
        parser = commands[word]
    assert parser.description.startswith(verb.summary + ".")


def test_verbs__the_cli_lists_each_with_its_summary():
    helps = {}
    for group in (build_parser(), *subcommands(build_parser()).values()):
        for action in group._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    helps[f"{group.prog} {choice.dest}".removeprefix("cairn ")] = choice.help
    for verb in VERBS:
        assert helps[verb.command] == verb.summary[0].lower() + verb.summary[1:]


OPERATIONS = {f"{op.method} {op.template}": op for op in api.operations(guarded=True)}


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__each_has_its_http_route_listing_its_failures(verb: Verb):
    operation = OPERATIONS.get(verb.route)
    assert operation is not None, f"no operation {verb.route}"
    assert operation.summary == verb.summary
    if verb.name != "resume_hook":  # its body is the hook's payload itself
        in_path = tuple(re.findall(r"{(\w+)}", verb.route))
        assert operation.body == verb.schema(leave_out=in_path)
    for error in verb.raises:
        status = status_for(error)
        assert 400 <= status < 500, f"{error} is not the caller's fault ({status})"
        assert status in operation.errors, f"{verb.route} does not list {status} ({error})"


@pytest.mark.parametrize(
    ("error", "status"),
    [(RunNotFound, 404), (RunFinished, 409), (InvalidName, 422), (ValueError, 422), (OSError, 500)],
)
def test_verbs__a_declared_failure_has_the_status_its_answer_has(error, status):
    assert status_for(error) == status
    if error is not OSError:
        instance = error("r1", "x") if error is RunFinished else error("r1")
        assert describe(instance, where="test")[0] == status


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__each_is_an_mcp_tool_taking_its_arguments(verb: Verb):
    tool = mcp_tools.BY_NAME[verb.name]
    assert tool.description.startswith(verb.summary + ".")
    assert list(tool.schema["properties"]) == [a.name for a in verb.arguments]
    assert tool.schema["additionalProperties"] is False


def test_verbs__each_surface_serves_exactly_the_declared_verbs():
    names = set(IDS)
    assert set(control.COMMANDS) == names
    assert set(verb_routes.SERVED) == names
    assert set(mcp_tools.VERB_CALLS) == names
    assert set(run_page.QUESTIONS) <= names


def test_verbs__the_table_names_each_verb_once():
    assert len({verb.name for verb in VERBS}) == len(VERBS)
    assert len({verb.route for verb in VERBS}) == len(VERBS)
