"""pydantic-ai agents in cairn workflows: each model request and tool call is a step.

The model is pydantic-ai's FunctionModel (scripted turns, no network); replays are made
by closing the engine while a tool is inside `gate` and letting a second engine resume.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.run import AgentRunResult
from pydantic_ai.toolsets import FunctionToolset

import cairn
from cairn.contrib.pydantic_ai import CairnAgent, workflow_tool

from .agent_kit import Script, support_agent
from .kit import WAIT, Gate, Kit


async def test_agent__each_request_and_tool_call_is_a_named_step(kit: Kit) -> None:
    script = Script(("lookup", {"order_id": "o-1"}), ("refund", {"order_id": "o-1"}))
    agent = support_agent(script)
    calls: Counter[str] = Counter()

    @agent.tool_plain
    async def lookup(order_id: str) -> dict[str, object]:
        calls["lookup"] += 1
        return {"order_id": order_id, "total": 42}

    @agent.tool_plain
    def refund(order_id: str) -> str:
        calls["refund"] += 1
        return f"refunded {order_id}"

    durable = CairnAgent(agent)

    @kit.workflow("agent.support")
    async def support(prompt: str) -> str:
        result = await durable.run(prompt)
        assert isinstance(result, AgentRunResult)
        return result.output

    async with kit.engine() as engine:
        run = await engine.start(support, "refund order o-1")
        output = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)

    assert output == "done: {'order_id': 'o-1', 'total': 42}; refunded o-1"
    assert [h.key for h in history] == [
        "support.model_request#1",
        "support.tool.lookup#1",
        "support.model_request#2",
        "support.tool.refund#1",
        "support.model_request#3",
    ]
    assert calls == {"lookup": 1, "refund": 1}
    # The history keeps the request's messages as input and the response as JSON.
    assert history[0].result["parts"][0]["tool_name"] == "lookup"


async def test_agent__a_resumed_run_asks_the_model_only_for_new_turns(kit: Kit, gate: Gate) -> None:
    script = Script(("lookup", {"order_id": "o-2"}), ("refund", {"order_id": "o-2"}))
    agent = support_agent(script)
    calls: Counter[str] = Counter()

    @agent.tool_plain
    async def lookup(order_id: str) -> str:
        calls["lookup"] += 1
        return "found"

    @agent.tool_plain
    async def refund(order_id: str) -> str:
        calls["refund"] += 1
        return await gate()

    durable = CairnAgent(agent)

    @kit.workflow("agent.resume")
    async def resume(prompt: str) -> str:
        return (await durable.run(prompt)).output

    first = kit.engine()
    await first.open()
    run = await first.start(resume, "refund o-2")
    await gate.hold(first)
    async with kit.engine() as second:
        output = await (await second.get(run.run_id)).result(timeout=WAIT)

    assert output == "done: found; through"
    assert calls == {"lookup": 1, "refund": 2}  # refund was in flight when the engine closed
    # Turns 0 and 1 were answered before the close: the second engine did not ask again.
    assert script.asked == {0: 1, 1: 1, 2: 1}


async def test_agent__a_workflow_tool_waits_for_a_human(kit: Kit) -> None:
    script = Script(("approve", {"amount": 30}), ("refund", {"amount": 30}))
    agent = support_agent(script)
    refunds: list[int] = []

    @agent.tool_plain
    @workflow_tool
    async def approve(amount: int) -> str:
        answer = await cairn.human_task(
            "approve-refund", title=f"Refund {amount}?", data={"amount": amount}
        )
        return "approved" if answer["ok"] else "refused"

    @agent.tool_plain
    async def refund(amount: int) -> str:
        refunds.append(amount)
        return f"refunded {amount}"

    durable = CairnAgent(agent)

    @kit.workflow("agent.approval")
    async def approval() -> str:
        return (await durable.run("refund 30")).output

    async with kit.engine() as engine:
        run = await engine.start(approval)
        async with asyncio.timeout(WAIT):
            while not (tasks := [t for t in await engine.tasks.list() if t.run_id == run.run_id]):
                await asyncio.sleep(0.01)
        await engine.tasks.submit(tasks[0].task_id, {"ok": True}, by="ann")
        output = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)

    assert output == "done: approved; refunded 30"
    assert refunds == [30]
    assert script.asked == {0: 1, 1: 1, 2: 1}  # the wait unwound the run: replayed, not re-asked
    assert "support.tool.approve#1" not in [h.key for h in history]


async def test_agent__a_model_retry_from_a_tool_step_reaches_the_model(kit: Kit) -> None:
    attempts: Counter[str] = Counter()
    agent = Agent(TestModel(), name="retrying")

    @agent.tool_plain
    async def flaky(x: int) -> str:
        attempts["flaky"] += 1
        if attempts["flaky"] == 1:
            raise ModelRetry("try once more")
        return "ok"

    durable = CairnAgent(agent)

    @kit.workflow("agent.retry")
    async def retrying() -> str:
        return (await durable.run("go")).output

    async with kit.engine() as engine:
        run = await engine.start(retrying)
        output = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)

    assert "ok" in output
    assert attempts["flaky"] == 2  # two steps, each one attempt: not cairn's step retries
    assert [h.key for h in history if "tool" in h.key] == [
        "retrying.tool.flaky#1",
        "retrying.tool.flaky#2",
    ]


def test_agent__a_name_is_required(offline_kit: Kit) -> None:
    with pytest.raises(cairn.InvalidValue, match="needs a name"):
        CairnAgent(Agent(TestModel()))


async def test_agent__live_streaming_apis_are_refused_in_favour_of_stream(kit: Kit) -> None:
    durable = CairnAgent(Agent(TestModel(), name="streamer"))

    async def handler(ctx: object, events: object) -> None: ...

    @kit.workflow("agent.stream")
    async def streamer(how: str) -> str:
        try:
            if how == "handler":
                await durable.run("hi", event_stream_handler=handler)
            elif how == "run_stream":
                durable.run_stream("hi")
            else:
                durable.run_stream_events("hi")
        except cairn.InvalidArguments as refused:
            return str(refused)
        return "not refused"

    async with kit.engine() as engine:
        for how in ("handler", "run_stream", "run_stream_events"):
            said = await (await engine.start(streamer, how)).result(timeout=WAIT)
            assert "use CairnAgent(..., stream=...) and engine.read_stream" in said


async def test_agent__outside_workflow_code_streaming_is_the_plain_agents() -> None:
    durable = CairnAgent(Agent(TestModel(custom_output_text="streamed"), name="plain"))
    async with durable.run_stream("hi") as streamed:
        assert await streamed.get_output() == "streamed"


async def test_agent__outside_a_run_it_is_the_plain_agent() -> None:
    durable = CairnAgent(Agent(TestModel(custom_output_text="hello"), name="plain"))
    assert (await durable.run("hi")).output == "hello"


async def test_agent__overrides_and_run_toolsets_are_steps_too(kit: Kit) -> None:
    # The model and the tools are the ones pydantic-ai picks for the run: an override of
    # the model (the usual way to test an agent) and toolsets given to run() alike.
    script = Script(("extra", {"x": 1}))
    agent = Agent(TestModel(custom_output_text="not asked"), name="overridden")
    extras = FunctionToolset()

    @extras.tool_plain
    def extra(x: int) -> int:
        return x + 1

    durable = CairnAgent(agent)

    @kit.workflow("agent.override")
    async def overridden() -> str:
        with agent.override(model=script.model()):
            return (await durable.run("go", toolsets=[extras])).output

    async with kit.engine() as engine:
        run = await engine.start(overridden)
        output = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)

    assert output == "done: 2"
    assert [h.key for h in history] == [
        "overridden.model_request#1",
        "overridden.tool.extra#1",
        "overridden.model_request#2",
    ]


async def test_agent__calls_of_one_response_are_steps_in_order(kit: Kit, gate: Gate) -> None:
    # Two calls in one model response run one at a time, so their steps keep their keys
    # (lookup#1, lookup#2) on replay; the completed one is not called again.
    asked: Counter[str] = Counter()

    def both(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            calls = [ToolCallPart("lookup", {"order_id": o}, tool_call_id=o) for o in ("a", "b")]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(both), name="pair")

    @agent.tool_plain
    async def lookup(order_id: str) -> str:
        asked[order_id] += 1
        return await gate() if order_id == "b" else "found"

    durable = CairnAgent(agent)

    @kit.workflow("agent.pair")
    async def pair() -> list[str]:
        result = await durable.run("go")
        return [
            p.content
            for m in result.all_messages()
            for p in m.parts
            if p.part_kind == "tool-return"
        ]

    first = kit.engine()
    await first.open()
    run = await first.start(pair)
    await gate.hold(first)
    async with kit.engine() as second:
        returns = await (await second.get(run.run_id)).result(timeout=WAIT)
        keys = [h.key for h in await second.history(run.run_id)]

    assert returns == ["found", "through"]
    assert asked == {"a": 1, "b": 2}
    assert keys == [
        "pair.model_request#1",
        "pair.tool.lookup#1",
        "pair.tool.lookup#2",
        "pair.model_request#2",
    ]


async def test_agent__a_tool_that_fails_for_good_fails_its_step(kit: Kit) -> None:
    agent = Agent(TestModel(), name="failing")

    @agent.tool_plain
    async def broken(x: int) -> str:
        raise ValueError("the warehouse is down")

    durable = CairnAgent(agent, tool_retries=cairn.Retry(max_attempts=2, delay=0))

    @kit.workflow("agent.failing")
    async def failing() -> str:
        try:
            return (await durable.run("go")).output
        except cairn.StepFailed as failed:
            return f"{failed.step_name} after {failed.attempts}: {failed.message}"

    async with kit.engine() as engine:
        output = await (await engine.start(failing)).result(timeout=WAIT)

    assert output == "failing.tool.broken after 2: the warehouse is down"


async def test_agent__a_tool_step_that_waits_says_to_mark_it(kit: Kit) -> None:
    agent = Agent(TestModel(), name="unmarked")

    @agent.tool_plain
    async def approve(x: int) -> str:
        return str(await cairn.human_task("ok", title="ok?"))

    durable = CairnAgent(agent)

    @kit.workflow("agent.unmarked")
    async def unmarked() -> str:
        return (await durable.run("go")).output

    async with kit.engine() as engine:
        run = await engine.start(unmarked)
        with pytest.raises(cairn.RunFailed, match="mark it @workflow_tool") as failed:
            await run.result(timeout=WAIT)
    assert "after 1 attempt" in str(failed.value)  # a usage error: not retried
