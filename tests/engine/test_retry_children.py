"""retry of a parent that FAILED because a child failed: its failed child is retried too.

API.md: `engine.retry(run_id)` continues a FAILED run from the failed step. A child's
failure is the outcome its parent's wait recorded; replayed as it was, the retried parent
would be handed the same failure at once, so the failed child continues too (from its
own failed step), under the same id, and the parent waits for it again.
"""

from __future__ import annotations

from collections import Counter

import pytest

import cairn
from cairn.codecs import Encrypted
from cairn.errors import KeyUnavailable

from .kit import WAIT, Kit


def _declare(kit: Kit, calls: Counter[str], broken: dict[str, bool]) -> None:
    @kit.step("pack")
    def pack(item: str) -> str:
        calls["pack"] += 1
        return f"packed {item}"

    @kit.step("ship", retries=1)
    def ship(item: str) -> str:
        calls["ship"] += 1
        if broken["ship"]:
            raise ConnectionError("carrier down")
        return f"shipped {item}"

    @kit.workflow("rc.shipping")
    async def shipping(item: str) -> str:
        return f"{await pack(item)}, {await ship(item)}"

    @kit.workflow("rc.delivery")
    async def delivery(item: str) -> str:
        return await shipping(item)

    @kit.workflow("rc.order")
    async def order(item: str) -> list[str]:
        return [await pack(item), await delivery(item)]


async def test_retry__parent_failed_by_its_child_retries_the_child(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    broken = {"ship": True}
    _declare(kit, calls, broken)
    child, grandchild = "p/rc.delivery#1", "p/rc.delivery#1/rc.shipping#1"

    async with kit.engine() as engine:
        run = await engine.start("rc.order", "sku", run_id="p")
        with pytest.raises(cairn.RunFailed, match="carrier down"):
            await run.result(timeout=WAIT)
        assert (await engine.control.record(grandchild)).status == "FAILED"
        broken["ship"] = False  # the carrier is back
        await engine.retry("p", by="ada")
        result = await run.result(timeout=WAIT)
        history = await engine.history("p")
        below = [await engine.history(child), await engine.history(grandchild)]
        tree = sorted((r.run_id, r.status.value) for r in (await engine.list_runs(tree="p")).runs)
    assert result == ["packed sku", "packed sku, shipped sku"]
    # No second child: the failed ones continued, their completed steps not run again.
    assert tree == [("p", "COMPLETED"), (child, "COMPLETED"), (grandchild, "COMPLETED")]
    assert calls == {"pack": 2, "ship": 2}
    assert [(h.key, h.status, h.superseded) for h in history] == [
        ("pack#1", "completed", False),
        ("~child:rc.delivery#1", "failed", True),
        ("~child:rc.delivery#1", "completed", False),
    ]
    for found in [history, *below]:  # each retried, by whoever asked for the parent's
        assert [(e.number, e.cause, e.by) for e in found.executions][-1] == (2, "retry", "ada")


async def test_retry__a_caught_child_failure_is_not_retried(kit: Kit) -> None:
    @kit.workflow("rc.broken")
    async def broken() -> None:
        raise ValueError("always")

    @kit.workflow("rc.tolerant")
    async def tolerant(fail: dict[str, bool]) -> str:
        try:
            await broken()
        except cairn.ChildFailed:
            pass
        if fail["now"]:
            raise RuntimeError("after the child")
        return "done"

    async with kit.engine() as engine:
        run = await engine.start(tolerant, {"now": True}, run_id="t")
        with pytest.raises(cairn.RunFailed, match="after the child"):
            await run.result(timeout=WAIT)
        # Its failure came after the child's; retried, it fails the same way again.
        await engine.retry("t")
        with pytest.raises(cairn.RunFailed, match="after the child"):
            await run.result(timeout=WAIT)
        child = await engine.control.record("t/rc.broken#1")
    assert (child.status, child.execution) == ("FAILED", 1)


async def test_retry__a_child_chain_that_failed_is_retried_at_its_newest_run(kit: Kit) -> None:
    broken = {"now": True}

    @kit.step("check", retries=1)
    def check(n: int) -> int:
        if broken["now"]:
            raise ConnectionError("down")
        return n

    @kit.workflow("rc.hops")
    async def hops(n: int) -> int:
        if n < 1:
            cairn.continue_as_new(n + 1)
        return await check(n)

    @kit.workflow("rc.top")
    async def top() -> int:
        return await hops(0)

    async with kit.engine() as engine:
        run = await engine.start(top, run_id="top")
        with pytest.raises(cairn.RunFailed, match="down"):
            await run.result(timeout=WAIT)
        first = await engine.control.record("top/rc.hops#1")
        assert (first.status, first.continued_to is not None) == ("CONTINUED", True)
        broken["now"] = False
        await engine.retry("top")
        assert await run.result(timeout=WAIT) == 1
        newest = await engine.control.record(first.continued_to or "")
    assert (newest.status, newest.execution) == ("COMPLETED", 2)


async def test_retry__without_the_key_a_failed_child_is_not_retried_blind(kit: Kit) -> None:
    # Before: a process without the key could not read the parent's error, so it took it
    # for no child's failure and requeued the parent alone, which met its child's
    # failure again at once. Now it refuses, naming the key; with the key it cascades.
    calls: Counter[str] = Counter()
    broken = {"ship": True}
    _declare(kit, calls, broken)

    codec = Encrypted({"k1": b"\x01" * 32}, "k1")
    async with kit.engine(codec=codec) as engine:
        run = await engine.start("rc.order", "sku", run_id="e")
        with pytest.raises(cairn.RunFailed, match="carrier down"):
            await run.result(timeout=WAIT)
    broken["ship"] = False
    async with kit.engine(workers=0) as keyless:
        with pytest.raises(KeyUnavailable) as refused:
            await keyless.retry("e")
        assert str(refused.value).startswith("cannot retry run 'e': its error is encrypted")
        assert refused.value.key_id == "k1"
        for run_id in ("e", "e/rc.delivery#1", "e/rc.delivery#1/rc.shipping#1"):
            assert (await keyless.control.record(run_id)).status == "FAILED"  # untouched
    async with kit.engine(codec=codec) as engine:
        await engine.retry("e")
        assert await (await engine.get("e")).result(timeout=WAIT) == [
            "packed sku",
            "packed sku, shipped sku",
        ]


async def test_retry__a_detached_child_it_awaited_is_retried_too(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    broken = {"ship": True}
    _declare(kit, calls, broken)

    @kit.workflow("rc.detaching")
    async def detaching(item: str) -> str:
        shipping = kit.registry.workflow("rc.shipping")
        handle = await cairn.start_child(shipping, item, detached=True)
        return str(await handle.result())

    async with kit.engine() as engine:
        run = await engine.start(detaching, "sku", run_id="d")
        with pytest.raises(cairn.RunFailed, match="carrier down"):
            await run.result(timeout=WAIT)
        broken["ship"] = False
        await engine.retry("d")
        assert await run.result(timeout=WAIT) == "packed sku, shipped sku"
        child = await engine.control.record("d/rc.shipping#1")
    assert (child.status, child.execution) == ("COMPLETED", 2)
    assert calls == {"pack": 1, "ship": 2}
