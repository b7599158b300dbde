"""Every surface exposes each verb of `cairn.runtime.verbs.VERBS` with the same arguments."""

from __future__ import annotations

import argparse
import inspect

import pytest

from cairn import Client, Engine
from cairn.cli.main import build_parser
from cairn.dashboard import api
from cairn.dashboard.api.replies import status_of
from cairn.errors import CairnError
from cairn.runtime.control import RunControl
from cairn.runtime.verbs import VERBS, Verb
from cairn.testing import TestEngine

IDS = [verb.name for verb in VERBS]


def parameters(method) -> list[tuple[str, object, object, object]]:
    """(name, kind, default, annotation) of each argument after self."""
    found = inspect.signature(method).parameters.values()
    return [(p.name, p.kind, p.default, p.annotation) for p in found][1:]


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__one_implementation_on_run_control(verb: Verb):
    method = getattr(RunControl, verb.name)
    assert inspect.iscoroutinefunction(method)
    assert inspect.getdoc(method)


@pytest.mark.parametrize("surface", [Engine, TestEngine, Client], ids=lambda s: s.__name__)
@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__each_api_class_has_the_method_with_its_arguments(surface: type, verb: Verb):
    method = getattr(surface, verb.name, None)
    assert method is not None, f"{surface.__name__} has no {verb.name}"
    assert parameters(method) == parameters(getattr(RunControl, verb.name))
    assert inspect.iscoroutinefunction(method) is (surface is not Client)
    assert inspect.getdoc(method)


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


OPERATIONS = {f"{op.method} {op.template}": op for op in api.operations(guarded=True)}


@pytest.mark.parametrize("verb", VERBS, ids=IDS)
def test_verbs__each_has_its_http_route_listing_its_failures(verb: Verb):
    operation = OPERATIONS.get(verb.route)
    assert operation is not None, f"no operation {verb.route}"
    for error in verb.raises:
        status = status_of(error(*_args(error))) if issubclass(error, CairnError) else 422
        assert status in operation.errors, f"{verb.route} does not list {status} ({error})"


def _args(error: type[Exception]) -> tuple[str, ...]:
    """Arguments that construct `error` (RunNotFound takes a run id, RunFinished two)."""
    needed = [
        p
        for p in list(inspect.signature(error).parameters.values())
        if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
    ]
    return tuple("x" for _ in needed)


def test_verbs__the_table_names_each_verb_once():
    assert len({verb.name for verb in VERBS}) == len(VERBS)
    assert len({verb.route for verb in VERBS}) == len(VERBS)
