"""The registry: names, duplicates naming both definitions, re-imports, decorator checks."""

from __future__ import annotations

import importlib
import inspect
import sys
import uuid
from pathlib import Path

import pytest

import cairn
from cairn.authoring.step import make_step
from cairn.authoring.workflow import make_workflow


def _unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def test_registry__duplicate_workflow_name_names_both_definitions() -> None:
    registry = cairn.Registry()

    async def first_definition() -> None:
        return None

    async def second_definition() -> None:
        return None

    make_workflow(first_definition, name="orders.process", reg=registry)
    with pytest.raises(ValueError) as info:
        make_workflow(second_definition, name="orders.process", reg=registry)
    message = str(info.value)
    assert "'orders.process'" in message
    assert f"{__name__}.{first_definition.__qualname__}" in message
    assert f"{__name__}.{second_definition.__qualname__}" in message
    assert f"{__file__}:" in message  # where each one is, file and line
    assert registry.workflows["orders.process"].fn is first_definition


def test_registry__duplicate_step_name_names_both_definitions() -> None:
    registry = cairn.Registry()

    def charge_card() -> None:
        return None

    async def charge_wallet() -> None:
        return None

    make_step(charge_card, "charge", None, None, registry)
    with pytest.raises(ValueError, match="step name 'charge'") as info:
        make_step(charge_wallet, "charge", None, None, registry)
    assert "charge_card" in str(info.value) and "charge_wallet" in str(info.value)


def test_registry__duplicate_through_public_decorators() -> None:
    name = _unique("tests.dup")

    @cairn.workflow(name)
    async def one() -> None:
        return None

    with pytest.raises(ValueError, match="one") as info:

        @cairn.workflow(name)
        async def two() -> None:
            return None

    assert "two" in str(info.value)


def test_registry__workflows_and_steps_share_no_namespace() -> None:
    registry = cairn.Registry()

    async def fn() -> None:
        return None

    make_workflow(fn, name="same", reg=registry)
    make_step(fn, "same", None, None, registry)  # a step may share a workflow's name


def test_registry__same_definition_reimported_is_fine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"reimported_{uuid.uuid4().hex[:8]}"
    name = _unique("tests.reimported")
    (tmp_path / f"{module}.py").write_text(
        "import cairn\n\n"
        f"@cairn.step({name + '.step'!r})\n"
        "def double(x: int) -> int:\n    return 2 * x\n\n"
        f"@cairn.workflow({name!r})\n"
        "async def flow(x: int) -> int:\n    return await double(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        first = importlib.import_module(module)
        second = importlib.reload(first)  # a module imported twice redefines its functions
        assert second.flow is not None and second.double(2) == 4
    finally:
        sys.modules.pop(module, None)


def test_registry__default_names() -> None:
    registry = cairn.Registry()

    async def unnamed_flow() -> None:
        return None

    def unnamed_step() -> None:
        return None

    flow = make_workflow(unnamed_flow, reg=registry)
    step = make_step(unnamed_step, None, None, None, registry)
    assert flow.name == f"{__name__}.{unnamed_flow.__qualname__}"
    assert step.name == unnamed_step.__qualname__
    assert registry.workflow(flow.name) is flow


def test_registry__unknown_workflow_lists_what_is_known() -> None:
    registry = cairn.Registry()

    async def known() -> None:
        return None

    make_workflow(known, name="a.known", reg=registry)
    with pytest.raises(cairn.ConfigError, match=r"'a\.missing'.*a\.known"):
        registry.workflow("a.missing")


def test_decorators__keep_signature_name_and_doc() -> None:
    registry = cairn.Registry()

    async def fetch_order(order_id: str, *, full: bool = False) -> dict[str, str]:
        """Fetch an order."""
        return {"id": order_id}

    step = make_step(fetch_order, None, None, None, registry)
    flow = make_workflow(fetch_order, name="sig.flow", reg=registry)
    for decorated in (step, flow):
        assert inspect.signature(decorated) == inspect.signature(fetch_order)
        assert decorated.__name__ == "fetch_order"
        assert decorated.__doc__ == "Fetch an order."


@pytest.mark.parametrize(
    ("declare", "error", "match"),
    [
        (lambda: cairn.step(timeout="soon"), ValueError, "'soon'"),
        (lambda: cairn.step(timeout=0), ValueError, "positive"),
        (lambda: cairn.step(retries=0), ValueError, "max_attempts"),
        (lambda: cairn.step(retries="3"), TypeError, "retries"),
        (lambda: cairn.step(42), TypeError, "name must be a string"),  # type: ignore[call-overload]
        (lambda: cairn.workflow(timeout="1 fortnight"), ValueError, "fortnight"),
        (lambda: cairn.workflow(max_recoveries=-1), ValueError, "max_recoveries"),
        (lambda: cairn.Retry(delay="2s", max_delay="1s"), ValueError, "max_delay"),
    ],
)
def test_decorators__bad_options_fail_at_decoration_time(
    declare: object, error: type[Exception], match: str
) -> None:
    def target() -> None:
        return None

    with pytest.raises(error, match=match):
        decorator = declare()  # type: ignore[operator]
        decorator(target)
