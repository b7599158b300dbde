"""A queue name of only whitespace is refused wherever a queue is named.

Such a name prints as nothing in `cairn runs list` and the dashboard, and a worker told
`--queue " "` would serve a queue nobody can see: the name rule (cairn.names) refuses it
with InvalidName (a ValueError), as it refuses an empty name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cairn
from cairn.cli.main import run as cli

from .kit import Kit

BLANKS = [" ", "  ", "\t", " \n "]


async def noop() -> None:
    return None


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
def test_blank_queue__refused_where_code_declares_one(kit: Kit, blank: str) -> None:
    with pytest.raises(cairn.InvalidName, match=r"^queue name .* is only whitespace$"):
        cairn.Queue(blank)
    with pytest.raises(cairn.InvalidName, match=r"^queue of workflow 'w' .* is only whitespace"):
        cairn.workflow(name="w", queue=blank)(noop)
    with pytest.raises(cairn.InvalidName, match=r"^queue of workflow 'w' .* is only whitespace"):
        cairn.Workflow("w", queue=blank, registry=cairn.Registry())
    with pytest.raises(cairn.InvalidName, match=r"^queue of step 's' .* is only whitespace"):
        cairn.step(name="s", queue=blank)(noop)
    with pytest.raises(cairn.InvalidName, match=r"^queue of step 's' .* is only whitespace"):
        cairn.Step("s", noop, queue=blank)
    with pytest.raises(cairn.InvalidName, match=r"^queue of step 'Blank' .* is only whitespace"):

        class Blank(cairn.Step):
            queue = blank

            async def execute(self) -> None: ...


async def test_blank_queue__refused_by_the_engine_and_its_verbs(kit: Kit) -> None:
    flow = kit.workflow("flows.noop")(noop)
    with pytest.raises(cairn.InvalidName, match=r"^queue ' ' is only whitespace"):
        kit.engine(queues=[" "])
    with pytest.raises(cairn.InvalidName, match=r"^step queue ' ' is only whitespace"):
        kit.engine(step_queues=[" "])
    async with kit.engine() as engine:
        with pytest.raises(cairn.InvalidName, match=r"^queue ' ' is only whitespace"):
            await engine.start(flow, queue=" ")
        with pytest.raises(cairn.InvalidName, match=r"^queue name ' ' is only whitespace"):
            await engine.queues.update(" ", concurrency=1)
        assert (await engine.list_runs()).runs == []
        assert await engine.queues.list() == []


@pytest.mark.parametrize(
    "argv",
    [
        ["worker", "--queue", " "],
        ["worker", "--queue", "mail", "  "],
        ["worker", "--step-queue", " "],
        ["queues", "set", " ", "--concurrency", "1"],
    ],
    ids=" ".join,
)
def test_blank_queue__refused_by_the_cli(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    assert cli([*argv, "--db", url]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "is only whitespace" in err
