"""Coming from DBOS (and the Ignition runtime modelled on it): their spellings, as written.

`options={...}` in DBOS words on steps and `run_step`, `except TheirError:` around a step,
and a step's own idempotency key; on both stores, through the one core.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock

from .kit import WAIT, Gate, Kit
from .seeds import finish, until


class TemporaryError(Exception):
    """A service's own error, whose __init__ needs arguments (as many do)."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


class Throttled(Exception):
    """A service's own error with an attribute of its own."""

    def __init__(self, message: str, *, retry_in: int = 0) -> None:
        super().__init__(message)
        self.retry_in = retry_in


class PaymentDeclined(cairn.FatalError):
    """A domain error built on cairn's own: never retried."""


class Sealed(Exception):
    """An exception class that refuses subclasses (as some libraries' classes do)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError(f"{cls.__name__}: Sealed cannot be subclassed")


DBOS_OPTIONS = {"max_attempts": 3, "interval_seconds": 1.0, "backoff_rate": 2.0}


async def test_dbos__options_retry_the_step_on_their_schedule(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    @cairn.step(name="my.step", options=DBOS_OPTIONS)
    async def flaky(order: str) -> str:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise ConnectionError("gateway down")
        return f"charged {order}"

    @kit.workflow("dbos.charge")
    async def charge(order: str) -> str:
        return str(await flaky(order))

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(charge, "o-1")
        assert await finish(engine, clock, run) == "charged o-1"
        [entry] = await engine.history(run.run_id)
        failed = await engine.control.attempts(run.run_id)
    assert (entry.key, entry.attempts, calls["flaky"]) == ("my.step#1", 3, 3)
    waits = [(a["retry_at"] - a["failed_at"]).total_seconds() for a in failed]
    assert waits == [pytest.approx(1.0, rel=0.11), pytest.approx(2.0, rel=0.11)]


async def test_dbos__retries_allowed_false_fails_at_the_first_error(kit: Kit) -> None:
    calls: list[int] = []

    @cairn.step(name="dbos.once", options={"retries_allowed": False})
    def once() -> None:
        calls.append(1)
        raise ConnectionError("no retry for me")

    @kit.workflow("dbos.no_retry")
    async def no_retry() -> int:
        try:
            await once()
        except cairn.StepFailed as failed:
            return failed.attempts
        return 0

    async with kit.engine() as engine:
        assert await (await engine.start(no_retry)).result(timeout=WAIT) == 1
    assert calls == [1]


async def test_dbos__run_step_options_are_cairns_not_the_functions(kit: Kit) -> None:
    # Before: options= went on to charge(), whose TypeError was retried three times.
    calls: list[str] = []

    async def charge(order: str, amount: int) -> str:
        calls.append(order)
        return f"{order}: {amount}"

    @kit.workflow("dbos.inline")
    async def inline(order: str) -> str:
        return str(
            await cairn.run_step(
                "charge", charge, order, amount=5, options={"max_attempts": 2, "timeout": "1m"}
            )
        )

    async with kit.engine() as engine:
        run = await engine.start(inline, "o-2")
        assert await run.result(timeout=WAIT) == "o-2: 5"
        [entry] = await engine.history(run.run_id)
    assert calls == ["o-2"] and entry.input == {"args": ["o-2"], "kwargs": {"amount": 5}}


async def test_dbos__run_step_bad_option_is_named_in_the_workflow(kit: Kit) -> None:
    async def charge() -> str:
        return "never"

    @kit.workflow("dbos.bad_option")
    async def bad_option() -> str:
        try:
            await cairn.run_step("charge", charge, options={"max_attempt": 2})
        except ValueError as exc:
            return str(exc)
        return "no error"

    async with kit.engine() as engine:
        message = await (await engine.start(bad_option)).result(timeout=WAIT)
    assert message.startswith("step 'charge': unknown key 'max_attempt' in options (known: ")


async def test_dbos__except_the_steps_own_error_class(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    @cairn.step(name="dbos.reserve", options={"max_attempts": 2, "interval_seconds": 0})
    def reserve(item: str) -> str:
        calls["reserve"] += 1
        raise TemporaryError(503, f"{item} unavailable")

    @cairn.step(name="dbos.release")
    def release(item: str) -> str:
        calls["release"] += 1
        return f"released {item}"

    @kit.workflow("dbos.compensate")
    async def compensate(item: str) -> dict[str, Any]:
        calls["workflow"] += 1
        try:
            await reserve(item)
        except TemporaryError as exc:  # the step's own class reaches the workflow
            assert isinstance(exc, cairn.StepFailed)
            facts = {
                "type": exc.error_type,
                "attempts": exc.attempts,
                "message": exc.error_message,
                "undo": await release(item),
            }
        # Parks the run: the wake-up replays the recorded failure, which must raise the
        # same class again, or the workflow would take another path.
        await cairn.sleep("1h")
        return facts

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(compensate, "seat-7")
        await until(engine, run.run_id, "SLEEPING")
        clock.advance(3600)
        result = await run.result(timeout=WAIT)
    assert result == {
        "type": f"{__name__}.TemporaryError",
        "attempts": 2,
        "message": "503: seat-7 unavailable",
        "undo": "released seat-7",
    }
    assert calls == {"workflow": 2, "reserve": 2, "release": 1}


async def test_dbos__a_caught_step_error_keeps_its_args_and_attributes(kit: Kit) -> None:
    @cairn.step(name="dbos.quote", options={"max_attempts": 2, "interval_seconds": 0})
    def quote() -> None:
        raise Throttled("still down", retry_in=30)

    @kit.workflow("dbos.caught")
    async def caught() -> dict[str, Any]:
        try:
            await quote()
        except Throttled as exc:
            facts = {
                "str": str(exc),
                "args": list(exc.args),
                "retry_in": exc.retry_in,
                "cairn": [exc.step_name, exc.attempts, exc.error_type, exc.message],  # type: ignore[attr-defined]
            }
        await cairn.sleep("1h")  # the replay after it must raise the same
        return facts

    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(caught)
        await until(engine, run.run_id, "SLEEPING")
        clock.advance(3600)
        facts = await run.result(timeout=WAIT)
    assert facts == {
        "str": "still down",
        "args": ["still down"],
        "retry_in": 30,
        "cairn": ["dbos.quote", 2, f"{__name__}.Throttled", "still down"],
    }


async def test_dbos__an_uncaught_own_error_fails_the_run_as_step_failed(kit: Kit) -> None:
    @cairn.step(name="dbos.decline", retries=1)
    def decline() -> None:
        raise PaymentDeclined("card declined")

    @kit.workflow("dbos.uncaught")
    async def uncaught() -> None:
        await decline()

    async with kit.engine() as engine:
        run = await engine.start(uncaught)
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
        stored = await engine.control.record(run.run_id)
    assert info.value.error_type == f"{__name__}.PaymentDeclined"
    assert stored.error is not None and '"type": "cairn.errors.StepFailed"' in stored.error


async def test_dbos__a_sync_workflow_catches_the_steps_class_too(kit: Kit) -> None:
    @cairn.step(name="dbos.sync_flaky", options={"retries_allowed": False})
    def flaky() -> None:
        raise TemporaryError(429, "slow down")

    @kit.workflow("dbos.sync")
    def sync_workflow() -> int:
        try:
            flaky()
        except TemporaryError as exc:
            return exc.attempts if isinstance(exc, cairn.StepFailed) else -1
        return 0

    async with kit.engine() as engine:
        assert await (await engine.start(sync_workflow)).result(timeout=WAIT) == 1


async def test_dbos__classes_that_cannot_be_found_again_give_step_failed_alone(
    kit: Kit,
) -> None:
    class LocalError(Exception):
        pass

    @cairn.step(name="dbos.local", retries=1)
    def local() -> None:
        raise LocalError("defined in a function: a replay could not import it")

    @cairn.step(name="dbos.sealed", retries=1)
    def sealed() -> None:
        raise Sealed("no subclasses")

    @kit.workflow("dbos.alone")
    async def alone() -> list[str]:
        seen = []
        for step in (local, sealed):
            try:
                await step()
            except cairn.StepFailed as exc:
                caught = isinstance(exc, LocalError | Sealed)
                seen.append(f"{type(exc).__name__} {exc.error_type.rsplit('.', 1)[1]} {caught}")
        return seen

    async with kit.engine() as engine:
        result = await (await engine.start(alone)).result(timeout=WAIT)
    assert result == ["StepFailed LocalError False", "StepFailed Sealed False"]


async def test_dbos__child_failed_carries_the_steps_class_name(kit: Kit) -> None:
    @cairn.step(name="dbos.child_step", retries=1)
    def child_step() -> None:
        raise TemporaryError(500, "child broke")

    @kit.workflow("dbos.child")
    async def child() -> None:
        await child_step()

    @kit.workflow("dbos.parent")
    async def parent() -> dict[str, Any]:
        try:
            await child()
        except cairn.ChildFailed as exc:
            return {"type": exc.error_type, "step_class": isinstance(exc, TemporaryError)}
        return {}

    async with kit.engine() as engine:
        result = await (await engine.start(parent)).result(timeout=WAIT)
    assert result == {"type": f"{__name__}.TemporaryError", "step_class": False}


async def test_dbos__idempotency_key_is_stable_across_retries_and_recovery(
    kit: Kit, gate: Gate
) -> None:
    seen: list[cairn.StepInfo] = []

    @cairn.step(name="dbos.pay", options={"max_attempts": 3, "interval_seconds": 0})
    async def pay(amount: int) -> str:
        info = cairn.current_step()
        seen.append(info)
        if info.attempt == 1:
            raise ConnectionError("try again")
        await gate()  # the first engine closes here; the second replays into the step
        return info.idempotency_key

    @cairn.step(name="dbos.refund")
    async def refund() -> str:
        return cairn.current_step().idempotency_key

    @kit.workflow("dbos.keys")
    async def keys() -> list[str]:
        return [await pay(10), await refund(), await pay(20)]

    first = kit.engine()
    await first.open()
    run = await first.start(keys, run_id="keys-1")
    await gate.hold(first)
    async with kit.engine() as second:
        result = await (await second.get("keys-1")).result(timeout=WAIT)
        other = await (await second.start(keys, run_id="keys-2")).result(timeout=WAIT)
    first_pay = [s for s in seen if s.run_id == run.run_id and s.key == "dbos.pay#1"]
    assert len(first_pay) >= 3  # attempt 1, attempt 2 (held), and again after the recovery
    assert {s.idempotency_key for s in first_pay} == {result[0]}
    assert [s.attempt for s in first_pay][:2] == [1, 2]
    assert len(set(result)) == 3  # each step of the run has its own
    assert not set(result) & set(other)  # and another run has others
    assert first_pay[0].name == "dbos.pay" and first_pay[0].run_id == "keys-1"


async def test_dbos__current_step_outside_a_step_is_refused(kit: Kit) -> None:
    with pytest.raises(cairn.NotInRun, match=r"cairn.current_step\(\) only works inside a step"):
        cairn.current_step()

    @kit.workflow("dbos.not_in_step")
    async def not_in_step() -> str:
        try:
            cairn.current_step()
        except cairn.NotInRun as exc:
            return str(exc)
        return "no error"

    async with kit.engine() as engine:
        message = await (await engine.start(not_in_step)).result(timeout=WAIT)
    assert "in workflow code use cairn.current_run()" in message


def test_dbos__failure_pickles_with_its_class() -> None:
    import pickle

    from cairn import step_failures

    failure = step_failures.failure(
        cairn.StepFailed,
        TemporaryError,
        step_failures.keep(TemporaryError(503, "down")),
        step_name="s",
        attempts=2,
        error_type=f"{__name__}.TemporaryError",
        error_message="503: down",
    )
    again = pickle.loads(pickle.dumps(failure))
    assert isinstance(again, TemporaryError) and isinstance(again, cairn.StepFailed)
    assert (again.step_name, again.attempts, str(again)) == ("s", 2, "503: down")
    assert (again.args, again.code) == (("503: down",), 503)
    assert again.__notes__ == [f"step 's' failed after 2 attempt(s): {__name__}.TemporaryError"]
