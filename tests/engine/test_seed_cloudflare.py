"""Coming from Cloudflare Workflows (Python SDK): `WorkflowEntrypoint`, as written there.

`run(self, event, step)` with `@step.do`, the call form, sleeps, `wait_for_event`; on both
stores, through the one core (same keys, replay, retries).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cairn
from cairn.authoring import schedules
from cairn.cli import check
from cairn.clock import VirtualClock

from .kit import WAIT, Gate, Kit
from .seeds import drive, finish, sleeping_until, until


async def test_cloudflare__the_cat_flow_as_written(kit: Kit) -> None:
    clock = VirtualClock()
    calls: Counter[str] = Counter()
    until_when = datetime.fromtimestamp(clock.now(), UTC) + timedelta(days=1)

    async def some_callable() -> str:
        calls["call form"] += 1
        return "called"

    class CatFlow(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> dict[str, Any]:
            @step.do(
                "fetch cat",
                config={
                    "retries": {"limit": 5, "delay": "1 second", "backoff": "exponential"},
                    "timeout": "15 minutes",
                },
            )
            async def fetch_cat() -> dict[str, str]:
                calls["fetch cat"] += 1
                if calls["fetch cat"] == 1:
                    raise ConnectionError("cat API hiccup")
                return {"name": event.payload["cat"]}

            cat = await fetch_cat()
            other = await step.do("call form", some_callable)
            await step.sleep("nap", "3 hours")
            await step.sleep_until("until", until_when)
            approval = await step.wait_for_event("approve", "approval", timeout="1 hour")
            return {
                "cat": cat["name"],
                "other": other,
                "approved": approval.payload["ok"],
                "type": approval["type"],
                "instance": event.instance_id,
                "started": event.timestamp.tzinfo is not None,
            }

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(CatFlow, {"cat": "Tom"}, run_id="cat-1")
        assert run.run_id == "cat-1"
        # Past the retry of fetch_cat, to the nap (3 hours after the retry).
        await drive(engine, clock, "cat-1", sleeping_until(started + 3 * 3600, within=5))
        clock.advance(3 * 3600)
        await drive(engine, clock, "cat-1", sleeping_until(until_when.timestamp()))
        clock.advance(24 * 3600)
        await until(engine, "cat-1", "WAITING")
        await engine.send_event("cat-1", "approval", {"ok": True})
        result = await run.result(timeout=WAIT)
        history = await engine.history("cat-1")
        listed = await engine.list_runs(workflow=CatFlow)
    assert result == {
        "cat": "Tom",
        "other": "called",
        "approved": True,
        "type": "approval",
        "instance": "cat-1",
        "started": True,
    }
    assert [(h.kind, h.key, h.attempts) for h in history] == [
        ("step", "fetch cat#1", 2),
        ("step", "call form#1", 1),
        ("sleep", "~sleep:nap#1", 1),
        ("sleep", "~sleep:until#1", 1),
        ("event", "~event:approval#1", 1),
    ]
    assert calls == {"fetch cat": 2, "call form": 1}
    assert [r.run_id for r in listed] == ["cat-1"] and history.workflow == "CatFlow"


async def test_cloudflare__dependencies_by_parameter_name_and_ctx(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    contexts: list[cairn.StepInfo] = []

    class Pipeline(cairn.WorkflowEntrypoint, registry=kit.registry):
        name = "cf.pipeline"

        async def run(self, event: Any, step: Any) -> Any:
            @step.do()
            async def fetch_order() -> dict[str, int]:
                calls["fetch_order"] += 1
                return {"total": event.payload}

            @step.do("price it")
            def price(fetch_order: dict[str, int], ctx: cairn.StepInfo) -> int:
                contexts.append(ctx)
                return fetch_order["total"] * 2

            @step.do("label", concurrent=True)
            async def label(price: int, fetch_order: dict[str, int], suffix: str = "!") -> str:
                return f"{fetch_order['total']} -> {price}{suffix}"

            # `label` needs `price`, which has not run: it runs first (and fetch_order
            # with it); fetch_order then runs once only.
            return [await label(), await label(suffix="?")]

    async with kit.engine() as engine:
        run = await engine.start(Pipeline, 21)
        result = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert result == ["21 -> 42!", "21 -> 42?"]
    assert [h.key for h in history] == ["fetch_order#1", "price it#1", "label#1", "label#2"]
    assert calls == {"fetch_order": 1}
    [ctx] = contexts
    assert (ctx.name, ctx.key, ctx.attempt, ctx.run_id) == ("price it", "price it#1", 1, run.run_id)


async def test_cloudflare__step_do_forms(kit: Kit) -> None:
    class Forms(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> list[Any]:
            @step.do
            async def bare() -> str:
                return "bare"

            @step.do
            def first() -> int:
                return 1

            @step.do("second", depends=[first])
            def second(one: int) -> int:
                return one + 1

            js_order = await step.do("js", {"retries": {"limit": 0}}, lambda: "js")
            return [await bare(), await second(), js_order]

    async with kit.engine() as engine:
        run = await engine.start(Forms)
        assert await run.result(timeout=WAIT) == ["bare", 2, "js"]
        keys = [h.key for h in await engine.history(run.run_id)]
    assert keys == ["js#1", "bare#1", "first#1", "second#1"]


async def test_cloudflare__retries_exhausted_and_config_errors(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    class Flaky(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> list[str]:
            @step.do("always fails", config={"retries": {"limit": 2, "delay": 0}})
            async def always() -> None:
                calls["always"] += 1
                raise ConnectionError("down")

            seen = []
            try:
                await always()
            except ConnectionError as exc:  # the step's own class, and a StepFailed
                seen.append(f"{type(exc).__name__} after {exc.attempts}")  # type: ignore[attr-defined]
            for config in (
                {"retries": {"limit": 1, "delay": "1s", "backoff": "linear"}},
                {"retry": {"limit": 1}},
                {"timeout": "1 month"},
            ):
                try:
                    step.do("bad", config=config)
                except ValueError as exc:
                    seen.append(str(exc))
            try:
                step.do(42)
            except TypeError as exc:
                seen.append(str(exc))
            return seen

    async with kit.engine() as engine:
        result = await (await engine.start(Flaky)).result(timeout=WAIT)
    assert calls == {"always": 3}
    assert result == [
        "StepFailed after 3",
        "step 'bad': config['retries']['backoff'] 'linear' is not supported (use \"constant\" "
        'or "exponential", or cairn.Retry(delay=..., backoff=FACTOR))',
        "step 'bad': unknown key 'retry' in config (known: retries, timeout)",
        "invalid duration for config['timeout'] of step 'bad': '1 month' (months and years vary in "
        'length: use days, e.g. "30 days", or sleep_until a date)',
        "step.do: the name must be a string, got 42",
    ]


async def test_cloudflare__unknown_dependency_is_named(kit: Kit) -> None:
    class Unknown(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> str:
            @step.do("uses missing")
            async def uses(missing_step: int) -> int:
                return missing_step

            @step.do("uses later")
            async def early(later: int) -> int:
                return later

            @step.do("later")
            async def later(early: int) -> int:  # would be a cycle: early is declared first
                return early

            errors = []
            for call in (uses, later):
                try:
                    await call()
                except TypeError as exc:
                    errors.append(str(exc))
            return errors

    async with kit.engine() as engine:
        errors = await (await engine.start(Unknown)).result(timeout=WAIT)
    assert [e.split(";")[0] for e in errors] == [
        "step 'uses missing': parameter 'missing_step' names no step function declared "
        "before it (declared: none)",
        "step 'uses later': parameter 'later' names no step function declared before it "
        "(declared: uses)",
    ]


async def test_cloudflare__wait_for_event_times_out(kit: Kit) -> None:
    clock = VirtualClock()

    class Approval(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> str:
            try:
                await step.wait_for_event("wait for approval", "approval", timeout="1 hour")
            except cairn.EventTimeout:
                return "timed out"
            return "approved"

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(Approval)
        await until(engine, run.run_id, "WAITING")
        assert await finish(engine, clock, run, tick=600) == "timed out"


async def test_cloudflare__registration(kit: Kit) -> None:
    class Base(cairn.WorkflowEntrypoint, registry=kit.registry):
        """No run: an intermediate base class, not registered."""

        def greet(self, who: str) -> str:
            return f"hello {who}"

    class Greeter(Base, registry=kit.registry, queue="greetings", version="v2"):
        name = "cf.greeter"

        async def run(self, event: Any, step: Any) -> str:
            return self.greet(event["payload"])

    class Reader(cairn.WorkflowEntrypoint, registry=kit.registry):
        def __init__(self, ctx: Any, env: Any) -> None:  # Cloudflare's own signature
            super().__init__(ctx, env)

        async def run(self, event: Any, step: Any) -> str:
            try:
                return str(self.env.MY_BUCKET)
            except AttributeError as exc:
                return str(exc)

    assert sorted(kit.registry.workflows) == ["Reader", "cf.greeter"]
    assert schedules.define(Greeter, cron="0 9 * * *").workflow == "cf.greeter"
    definition = kit.registry.workflows["cf.greeter"]
    assert (definition.queue, definition.version) == ("greetings", "v2")
    with pytest.raises(TypeError, match=r"Sync.run must be `async def run\(self, event, step\)`"):

        class Sync(cairn.WorkflowEntrypoint, registry=kit.registry):
            def run(self, event: Any, step: Any) -> None:  # type: ignore[override]
                return None

    with pytest.raises(ValueError, match=r"workflow name 'cf.greeter' is already registered"):

        class Greeter2(cairn.WorkflowEntrypoint, registry=kit.registry):
            name = "cf.greeter"

            async def run(self, event: Any, step: Any) -> None:
                return None

    async with kit.engine(queues=["greetings"]) as engine:
        assert await (await engine.start(Greeter, "Ada")).result(timeout=WAIT) == "hello Ada"
        message = await (await engine.start("Reader")).result(timeout=WAIT)
    assert message.startswith("self.env.MY_BUCKET: cairn has no Cloudflare bindings")


async def test_cloudflare__recovery_does_not_repeat_finished_steps(kit: Kit, gate: Gate) -> None:
    calls: Counter[str] = Counter()

    class Resumable(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> list[str]:
            @step.do("first")
            async def first() -> str:
                calls["first"] += 1
                return "one"

            @step.do("second")
            async def second(first: str) -> str:
                calls["second"] += 1
                await gate()  # the first engine closes here
                return f"{first} two"

            return [await first(), await second()]

    engine = kit.engine()
    await engine.open()
    run = await engine.start(Resumable, run_id="resumable")
    await gate.hold(engine)
    async with kit.engine() as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == ["one", "one two"]
    assert calls == {"first": 1, "second": 2}


def test_cloudflare__event_reads_like_cloudflares_dict() -> None:
    when = datetime(2025, 1, 1, tzinfo=UTC)
    event = cairn.WorkflowEvent({"a": 1}, when, "run-1")
    assert (event["payload"], event["timestamp"], event["instanceId"]) == ({"a": 1}, when, "run-1")
    with pytest.raises(KeyError, match=r"the event has payload, timestamp, instanceId"):
        event["params"]


async def test_cloudflare__javascript_names_and_the_events_timestamp(kit: Kit) -> None:
    clock = VirtualClock()
    when = datetime.fromtimestamp(clock.now(), UTC) + timedelta(hours=2)

    class JsNames(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> list[Any]:
            errors = []
            for options in ({"timeout": "1 hour"}, {"type": "approval", "timout": "1 hour"}):
                try:
                    await step.waitForEvent("bad", options)
                except ValueError as exc:
                    errors.append(str(exc))
            await step.sleepUntil("until", when)
            got = await step.waitForEvent("approve", {"type": "approval", "timeout": "1 hour"})
            return [got.type, got.payload, got.timestamp, got["timestamp"], *errors]

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(JsNames, run_id="js-1")
        await drive(engine, clock, "js-1", sleeping_until(when.timestamp()))
        clock.advance(2 * 3600)
        await until(engine, "js-1", "WAITING")
        await engine.send_event("js-1", "approval", {"ok": True})
        kind, payload, stamp, by_key, *errors = await run.result(timeout=WAIT)
        history = await engine.history("js-1")
    assert (kind, payload) == ("approval", {"ok": True})
    # When the run took the event: its history entry's finish time, past the sleep.
    [taken] = [h for h in history if h.kind == "event"]
    assert stamp == by_key == taken.finished_at and stamp >= when
    assert [h.key for h in history] == ["~sleep:until#1", "~event:approval#1"]
    assert errors == [
        "step.waitForEvent('bad'): options need \"type\", the event type",
        "step.waitForEvent('bad'): unknown option 'timout' (known: type, timeout)",
    ]


async def test_cloudflare__a_dynamically_named_step_runs_again_instead_of_diverging(
    kit: Kit, capsys: pytest.CaptureFixture[str]
) -> None:
    executions: Counter[str] = Counter()

    class Dynamic(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> int:
            executions["run"] += 1
            # A name made anew each execution: the cache key misses on every replay.
            n = executions["run"]
            stamp = await step.do(f"stamp {n}", lambda: n)
            await step.wait_for_event("go on", "go", timeout="1 hour")
            return int(stamp)

    async with kit.engine() as engine:
        run = await engine.start(Dynamic, run_id="dyn-1")
        await until(engine, "dyn-1", "WAITING")
        report = await engine.check()  # what `cairn check --db` prints
        await engine.send_event("dyn-1", "go", None)
        result = await run.result(timeout=WAIT)
        history = await engine.history("dyn-1")
    # The first execution ran "stamp 1"; the check's replay (the second) met "stamp 2"; the
    # execution after the event (the third) ran "stamp 3" rather than failing the run.
    assert result == 3
    assert [h.key for h in history] == ["stamp 1#1", "~event:go#1", "stamp 3#1"]
    assert report.ok and not report.divergences
    [miss] = report.cache_misses
    assert miss.describe() == (
        "run dyn-1 at seq 1: code started step 'stamp 2#1', history has step 'stamp 1#1' "
        "(history seq 1) and 1 more entries, not reached: they run again"
    )
    assert check.print_replay(report) == 0
    printed = capsys.readouterr().out
    assert "1 re-run steps their history has (cache misses)" in printed
    assert "run dyn-1 at seq 1: code started step 'stamp 2#1'" in printed


async def test_cloudflare__cache_keys_are_the_entrypoints_rule_not_cairns(kit: Kit) -> None:
    executions: Counter[str] = Counter()

    @kit.workflow("strict.dynamic")
    async def strict() -> int:
        executions["run"] += 1
        n = executions["run"]
        stamp = await cairn.run_step(f"stamp {n}", lambda: n)
        await cairn.wait_for_event("go", timeout="1 hour")
        return int(stamp)

    async with kit.engine() as engine:
        run = await engine.start(strict)
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "go", None)
        with pytest.raises(cairn.RunFailed, match="started step 'stamp 2#1'") as failed:
            await run.result(timeout=WAIT)
    assert failed.value.error_type == "cairn.errors.NonDeterminismError"
