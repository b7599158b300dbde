"""Two steps on a step queue with one name, declared in two modules.

A step queue's workers find a step's code by its name, so a name must mean one piece of
code. Two function steps of one name in two modules fail when the second is declared;
so do two class-based steps of one class name with `queue=` (and two `cairn.Step`s with
`queue=`), with one line naming both and how to tell them apart.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.authoring import registry

CLASS_STEP = """
import cairn

class Charge(cairn.Step):
    queue = "pay"

    async def execute(self, order):
        return "{module}"
"""

NAMED_CLASS_STEP = """
import cairn

class Charge(cairn.Step):
    name = "{module}.charge"
    queue = "pay"

    async def execute(self, order):
        return "{module}"
"""

STEP_CALL = """
import cairn

async def charge(order):
    return "{module}"

charge_step = cairn.Step("charge", charge, queue="pay")
"""

# Both modules' classes share their code: `execute` is inherited from one base class.
INHERITED_CLASS_STEP = """
import cairn
import shop_base

class Charge(shop_base.Charging):
    queue = "pay"
    max_retries = {retries}
"""

FUNCTION_STEP = """
import cairn

@cairn.step(queue="pay")
async def charge(order):
    return "{module}"
"""


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Write and import modules of the given source; cairn's registry is restored after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry.default_registry, "steps", dict(registry.default_registry.steps))

    loaded: list[str] = []

    def load(source: str, *names: str) -> None:
        for name in names:
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(source.format(module=name)))
            importlib.invalidate_caches()
            loaded.append(name)
            importlib.import_module(name)

    yield load
    for name in loaded:
        sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("source", "first", "second", "name"),
    [
        (FUNCTION_STEP, "shop_a.charge", "shop_b.charge", "charge"),
        (CLASS_STEP, "shop_a.Charge.execute", "shop_b.Charge.execute", "Charge"),
        (STEP_CALL, "shop_a.charge", "shop_b.charge", "charge"),
    ],
    ids=["function steps", "class steps", "cairn.Step calls"],
)
def test_queued_steps__one_name_in_two_modules_fails_at_the_second(
    modules: Callable[..., None], source: str, first: str, second: str, name: str
) -> None:
    modules(source, "shop_a")
    with pytest.raises(ValueError) as info:
        modules(source, "shop_b")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"step name {name!r} is already registered by {first} (")
    assert f"; cannot register {second} (" in message
    assert message.endswith("give one of them a name of its own (name=...)")
    assert registry.default_registry.steps[name].fn.__module__ == "shop_a"


def test_queued_steps__class_steps_sharing_their_execute_still_clash(
    modules: Callable[..., None],
) -> None:
    # Their code is one function, but they are two steps (other retries): a worker taking
    # one for the other would run it with the wrong options.
    modules(
        "import cairn\n\nclass Charging(cairn.Step):\n    async def execute(self): ...\n",
        "shop_base",
    )
    modules(INHERITED_CLASS_STEP.replace("{retries}", "1"), "shop_a")
    with pytest.raises(ValueError) as info:
        modules(INHERITED_CLASS_STEP.replace("{retries}", "5"), "shop_b")
    assert str(info.value).startswith(
        "step name 'Charge' is already registered by shop_a.Charge.execute ("
    )
    assert "; cannot register shop_b.Charge.execute (" in str(info.value)
    assert registry.default_registry.steps["Charge"].retry.max_attempts == 2


def test_queued_steps__class_steps_named_apart_both_register(
    modules: Callable[..., None],
) -> None:
    modules(NAMED_CLASS_STEP, "shop_a", "shop_b")
    steps = registry.default_registry.steps
    assert steps["shop_a.charge"].fn.__module__ == "shop_a"
    assert steps["shop_b.charge"].fn.__module__ == "shop_b"
    assert (steps["shop_a.charge"].queue, steps["shop_b.charge"].queue) == ("pay", "pay")
