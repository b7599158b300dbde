"""Steps on a step queue execute on the workers serving it while their run parks."""

from __future__ import annotations

import asyncio
import http.server
import os
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

import cairn
from cairn.authoring.primitives import idempotency_key
from cairn.errors import InvalidName, RunCancelled
from cairn.representation import runs as run_forms
from cairn.representation import words
from cairn.steps import http as steps_http
from cairn.store.programs import step_tasks

from .kit import WAIT, Kit

HERE = os.getpid()


async def test_step_queue__step_runs_only_on_a_worker_serving_its_queue(kit: Kit) -> None:
    ran: list[str] = []

    @kit.step("render", queue="gpu")
    async def render(frame: int) -> dict[str, int]:
        ran.append(f"render {frame}")
        return {"frame": frame, "pixels": frame * 100}

    @kit.step("plain")
    async def plain(n: int) -> int:
        ran.append(f"plain {n}")
        return n + 1

    @kit.workflow("sq.movie")
    async def movie(n: int) -> list[object]:
        first = await plain(n)
        picture = await render(first)
        return [first, picture]

    async with kit.engine() as cpu:
        handle = await cpu.start(movie, 1)
        run_id = handle.run_id
        async with asyncio.timeout(WAIT):
            while (await cpu.control.record(run_id)).status != "WAITING":
                await asyncio.sleep(0.01)
        run = await cpu.control.record(run_id)
        assert run.waiting_for == "step:render@gpu"
        await asyncio.sleep(0.3)  # a worker without the queue never executes the step
        assert ran == ["plain 1"]
        async with kit.engine(step_queues=["gpu"], workers=4, claim=False) as gpu:
            assert await handle.result(timeout=WAIT) == [2, {"frame": 2, "pixels": 200}]
            gpu_owner = gpu.worker.env.owner if gpu.worker is not None else ""
        assert ran == ["plain 1", "render 2"]
        history = await cpu.history(run_id)
        reports = [e for e in history if e.kind == "remote"]
        assert len(reports) == 1
        assert reports[0].result["queue"] == "gpu"
        assert reports[0].result["worker"] == gpu_owner
        steps = {e.name: e for e in history if e.kind == "step"}
        assert steps["render"].status == "completed"
        assert steps["render"].result == {"frame": 2, "pixels": 200}


async def test_step_queue__failed_remote_attempts_follow_the_retry_policy(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @kit.step("flaky", queue="gpu", retries=cairn.Retry(max_attempts=3, delay="0.1s", jitter=0))
    async def flaky() -> str:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise ConnectionError(f"card busy {calls['flaky']}")
        return "done"

    @kit.step("doomed", queue="gpu", retries=2)
    def doomed() -> str:
        calls["doomed"] += 1
        raise ValueError("no such model")

    @kit.workflow("sq.retry")
    async def retrying() -> list[str]:
        out = [await flaky()]
        try:
            await doomed()
        except cairn.StepFailed as failed:
            out.append(f"{failed.error_type}: {failed.error_message} x{failed.attempts}")
        return out

    async with kit.engine(step_queues=["gpu"]) as engine:
        handle = await engine.start(retrying)
        result = await handle.result(timeout=WAIT)
        assert result == ["done", "builtins.ValueError: no such model x2"]
        assert calls == Counter({"flaky": 3, "doomed": 2})
        failed = [a for a in await engine.control.attempts(handle.run_id) if a["key"] == "flaky#1"]
        assert [a["attempt"] for a in failed] == [1, 2]
        assert failed[0]["message"] == "card busy 1"
        assert failed[0]["worker"] == (engine.worker.env.owner if engine.worker else None)


async def test_step_queue__timeout_fails_the_remote_attempt(kit: Kit) -> None:
    @kit.step("slow", queue="gpu", timeout="0.2s", retries=1)
    async def slow() -> str:
        await asyncio.sleep(30)
        return "never"

    @kit.workflow("sq.timeout")
    async def timing() -> str:
        try:
            return str(await slow())
        except cairn.StepTimeout as timeout:
            return f"timed out: {timeout.error_message}"

    async with kit.engine(step_queues=["gpu"]) as engine:
        handle = await engine.start(timing)
        assert await handle.result(timeout=WAIT) == (
            "timed out: step 'slow' attempt 1 timed out after 0.2s"
        )


async def test_step_queue__cancel_stops_the_remote_attempt(kit: Kit) -> None:
    started = asyncio.Event()
    stopped = asyncio.Event()

    @kit.step("long", queue="gpu")
    async def long() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "never"

    @kit.workflow("sq.cancel")
    async def cancelling() -> str:
        return str(await long())

    async with kit.engine(step_queues=["gpu"], lease="0.6s") as engine:
        handle = await engine.start(cancelling)
        async with asyncio.timeout(WAIT):
            await started.wait()
        await engine.cancel(handle.run_id)
        with pytest.raises(RunCancelled):
            await handle.result(timeout=WAIT)
        async with asyncio.timeout(WAIT):
            await stopped.wait()  # at its next lease renewal
            while [t.status for t in await engine.store.read(step_tasks.of_run(handle.run_id))] != [
                "dropped"
            ]:
                await asyncio.sleep(0.01)


@pytest.mark.parametrize("sync_step", [False, True], ids=["async-step", "sync-step"])
async def test_step_queue__a_cancel_records_the_cut_off_attempt_as_cancelled(
    kit: Kit, sync_step: bool
) -> None:
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    calls: Counter[str] = Counter()

    @kit.step("long", queue="gpu")
    async def long_async() -> str:
        calls["long"] += 1
        started.set()
        await asyncio.sleep(30)
        return "never"

    @kit.step("long_sync", queue="gpu")
    def long_sync() -> str:
        calls["long"] += 1
        loop.call_soon_threadsafe(started.set)
        while True:
            cairn.check_cancelled()  # raises once the worker stopped the attempt
            threading.Event().wait(0.005)

    @kit.workflow("sq.cancelled")
    async def cancelling(sync: bool) -> str:
        return str(await (long_sync() if sync else long_async()))

    async with kit.engine(step_queues=["gpu"], lease="0.6s") as engine:
        handle = await engine.start(cancelling, sync_step)
        async with asyncio.timeout(WAIT):
            await started.wait()
        await engine.cancel(handle.run_id)
        with pytest.raises(RunCancelled):
            await handle.result(timeout=WAIT)
        async with asyncio.timeout(WAIT):
            while [t.status for t in await engine.store.read(step_tasks.of_run(handle.run_id))] != [
                "dropped"
            ]:
                await asyncio.sleep(0.01)
        owner = engine.worker.env.owner if engine.worker is not None else ""
        name = "long_sync" if sync_step else "long"
        # One attempt, ended cancelled, on the worker that ran it: as for a local step.
        [attempt] = await engine.control.attempts(handle.run_id)
        assert (attempt["key"], attempt["attempt"], attempt["outcome"]) == (
            f"{name}#1",
            1,
            "cancelled",
        )
        assert attempt["message"] == f"step {name!r} stopped: its run was cancelled"
        assert attempt["worker"] == owner
        history = await engine.history(handle.run_id)
        [sent] = [e for e in history if e.kind == "remote"]
        assert sent.status == "cancelled"
        assert words.ran_on(sent) == "sent to step queue 'gpu': cancelled with its run"
        assert [e.kind for e in history].count("cancel") == 1
        await asyncio.sleep(0.7)  # past a lease: no worker takes the attempt again
        assert calls == Counter({"long": 1})
        assert engine.step_worker is not None and not engine.step_worker.active  # slot freed


async def test_step_queue__run_step_with_queue_imports_the_function(kit: Kit) -> None:
    @kit.workflow("sq.inline")
    async def inline(n: int) -> int:
        return int(await cairn.run_step("triple", triple, n, queue="gpu"))

    async with kit.engine(step_queues=["gpu"]) as engine:
        handle = await engine.start(inline, 5)
        assert await handle.result(timeout=WAIT) == 15


async def test_step_queue__run_step_with_queue_refuses_a_local_function(kit: Kit) -> None:
    @kit.workflow("sq.local")
    async def local() -> str:
        try:
            await cairn.run_step("x", lambda: 1, queue="gpu")
        except TypeError as exc:
            return str(exc)
        return "ran"

    async with kit.engine(step_queues=["gpu"]) as engine:
        handle = await engine.start(local)
        message = await handle.result(timeout=WAIT)
        assert message.startswith("cairn.run_step 'x' with queue= needs a module-level function")


def test_step_queue__bad_queue_name_is_refused(offline_kit: Kit) -> None:
    with pytest.raises(InvalidName, match="queue of step 'bad'"):
        offline_kit.step("bad", queue="")(lambda: 1)
    with pytest.raises(InvalidName, match="step queue"):
        cairn.Engine("sqlite:///:memory:", step_queues=["gpu", 7])  # type: ignore[list-item]


def triple(n: int) -> int:
    """A module-level function for cairn.run_step(..., queue=)."""
    return n * 3


async def test_step_queue__sync_workflow_and_step_with_secret_input(kit: Kit) -> None:
    @kit.step("sign", queue="vault", keep_input=False)
    def sign(document: str, key: str) -> str:
        return f"{document} signed with {len(key)}-char key"

    @kit.workflow("sq.sync")
    def signing(document: str) -> str:
        return str(sign(document, key="s3cr3t"))

    async with kit.engine(step_queues=["vault"]) as engine:
        handle = await engine.start(signing, "deed")
        assert await handle.result(timeout=WAIT) == "deed signed with 6-char key"
        history = await engine.history(handle.run_id)
        step = next(e for e in history if e.kind == "step")
        assert "s3cr3t" not in repr(step.input)
        tasks = await engine.store.read(step_tasks.of_run(handle.run_id))
        assert [(t.status, t.input) for t in tasks] == [("done", None)]


async def test_step_queue__a_stopping_worker_hands_its_attempt_back_at_once(kit: Kit) -> None:
    started = asyncio.Event()
    calls: Counter[str] = Counter()

    @kit.step("render", queue="gpu")
    async def render() -> str:
        calls["render"] += 1
        started.set()
        if calls["render"] == 1:
            await asyncio.sleep(30)  # cut off when its worker stops
        return "rendered"

    @kit.workflow("sq.handback")
    async def handback() -> str:
        return str(await render())

    # A lease of a minute: the second worker takes the attempt long before it would run out.
    async with kit.engine(lease="60s") as runs:
        first = kit.engine(step_queues=["gpu"], claim=False, lease="60s")
        await first.open()
        handle = await runs.start(handback)
        async with asyncio.timeout(WAIT):
            await started.wait()
        await first.close()  # no grace: the attempt is cut off and handed back
        tasks = await runs.store.read(step_tasks.of_run(handle.run_id))
        assert [(t.status, t.claims) for t in tasks] == [("queued", 1)]
        async with kit.engine(step_queues=["gpu"], claim=False, lease="60s"):
            assert await handle.result(timeout=WAIT) == "rendered"
    assert calls["render"] == 2


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every POST with 200, keeping its Idempotency-Key in `server.keys`."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.keys.append(self.headers.get("Idempotency-Key"))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str | None]]]:
    """A tiny HTTP server on 127.0.0.1: its URL and the Idempotency-Keys it was sent."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.keys = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/pay", server.keys  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("sync_step", [False, True], ids=["async-step", "sync-step"])
async def test_step_queue__step_code_sees_the_same_context_as_a_local_step(
    kit: Kit, recorder: tuple[str, list[str | None]], sync_step: bool
) -> None:
    url, keys = recorder
    seen: dict[str, list[tuple[object, ...]]] = {"pay": [], "local": []}
    retry = cairn.Retry(max_attempts=2, delay=0, max_delay=0)

    def body(where: str) -> cairn.StepInfo:
        step = cairn.current_step()
        run = cairn.current_run()
        seen[where].append((step.run_id, step.key, step.name, step.attempt, step.idempotency_key))
        seen[f"{where} run"] = [(run.run_id, run.workflow, run.parent_id, run.version)]
        cairn.progress(f"{where} attempt {step.attempt}", current=step.attempt, total=2)
        cairn.set_columns(**{where: step.attempt})
        cairn.check_cancelled()
        return step

    def outcome(step: cairn.StepInfo) -> str:
        if step.attempt == 1:
            raise ConnectionError("the bank hung up")
        return step.idempotency_key

    if sync_step:

        @kit.step("pay", queue="pay", retries=retry)
        def pay() -> str:
            step = body("pay")
            steps_http.post(url, json_body={"order": 1})  # in a step's code: sent at once
            return outcome(step)

        @kit.step("local", retries=retry)
        def local() -> str:
            step = body("local")
            steps_http.post(url, json_body={"order": 1})
            return outcome(step)
    else:

        @kit.step("pay", queue="pay", retries=retry)
        async def pay() -> str:
            step = body("pay")
            await steps_http.post(url, json_body={"order": 1})
            return outcome(step)

        @kit.step("local", retries=retry)
        async def local() -> str:
            step = body("local")
            await steps_http.post(url, json_body={"order": 1})
            return outcome(step)

    @kit.workflow("sq.context", version="v7")
    async def flow() -> list[str]:
        return [await local(), await pay()]

    async with kit.engine(step_queues=["pay"]) as engine:
        handle = await engine.start(flow)
        local_key, pay_key = await handle.result(timeout=WAIT)
        summary = await handle.describe()
    run_id = handle.run_id
    assert seen["local"] == [
        (run_id, "local#1", "local", n, idempotency_key(run_id, "local#1")) for n in (1, 2)
    ]
    assert seen["pay"] == [
        (run_id, "pay#1", "pay", n, idempotency_key(run_id, "pay#1")) for n in (1, 2)
    ]
    assert (local_key, pay_key) == (seen["local"][0][4], seen["pay"][0][4])
    assert seen["pay run"] == seen["local run"] == [(run_id, "sq.context", None, "v7")]
    # The same Idempotency-Key on every attempt, wherever the step executed.
    assert keys == [local_key, local_key, pay_key, pay_key]
    assert summary.columns == {"local": 2, "pay": 2}
    assert summary.progress is not None and summary.progress["message"] == "pay attempt 2"


async def test_step_queue__durable_primitives_are_refused_as_in_a_local_step(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @kit.step("remote.sleeper", queue="pay", retries=3)
    async def sleeper() -> None:
        calls["sleeper"] += 1
        await cairn.sleep("1s")

    @kit.workflow("sq.refused")
    async def flow() -> str:
        try:
            await sleeper()
        except cairn.StepFailed as failed:
            return f"{failed.error_type} x{failed.attempts}: {failed.error_message}"
        return "slept"

    async with kit.engine(step_queues=["pay"]) as engine:
        handle = await engine.start(flow)
        assert await handle.result(timeout=WAIT) == (
            "cairn.errors.NotInRun x1: cairn.sleep() cannot be called inside step "
            "'remote.sleeper': a step runs once and is not replayed; call it from the workflow"
        )
    assert calls == {"sleeper": 1}


async def test_step_queue__a_class_based_step_takes_its_queue_from_its_class(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    class Charge(cairn.Step):
        name = "sq.charge"
        queue = "pay"
        max_retries = 1
        retry_delay = "0s"

        async def execute(self, amount: int) -> list[object]:
            calls["charge"] += 1
            step = cairn.current_step()
            if step.attempt == 1:
                raise ConnectionError("the bank hung up")
            return [amount, step.key, step.attempt]

    kit.registry.add_step(Charge())  # a private registry (cairn's own has it already)

    @kit.workflow("sq.class_step")
    async def flow(amount: int) -> list[object]:
        return list(await Charge()(amount))

    async with kit.engine(step_queues=["pay"]) as engine:
        handle = await engine.start(flow, 5)
        assert await handle.result(timeout=WAIT) == [5, "sq.charge#1", 2]
        history = await engine.history(handle.run_id)
    assert [e.result["queue"] for e in history if e.kind == "remote"] == ["pay", "pay"]
    assert calls == {"charge": 2}


async def _waiting_text(engine: cairn.Engine, run_id: str) -> str:
    shown = await run_forms.fetch(engine.control, run_id)
    assert shown.waiting is not None
    return words.waiting_text(shown.waiting, now=shown.now)


async def test_step_queue__a_run_waiting_on_it_says_when_no_live_worker_serves_it(
    kit: Kit,
) -> None:
    released = asyncio.Event()

    @kit.step("train", queue="gpu")
    async def train() -> str:
        await released.wait()
        return "trained"

    @kit.workflow("sq.waits")
    async def waits() -> str:
        return str(await train())

    waiting = "a worker of step queue 'gpu' to run step 'train'"
    unserved = f"{waiting} (no live worker serves it)"
    async with kit.engine() as cpu:  # live, but it serves no step queue
        # A worker of the queue whose heartbeat has stopped (killed) serves nobody.
        silent = kit.engine(step_queues=["gpu"], claim=False, lease="0.5s")
        await silent.open()
        await silent._die()
        handle = await cpu.start(waits)
        async with asyncio.timeout(WAIT):
            while (await cpu.control.record(handle.run_id)).status != "WAITING":
                await asyncio.sleep(0.01)
            while (text := await _waiting_text(cpu, handle.run_id)) != unserved:
                assert text == waiting  # until the killed worker's lease has run out
                await asyncio.sleep(0.05)
        shown = await run_forms.fetch(cpu.control, handle.run_id)
        assert shown.waiting is not None and shown.waiting["no_live_worker"] is True

        async with kit.engine(step_queues=["gpu"], claim=False):
            async with asyncio.timeout(WAIT):
                while (await cpu.store.read(step_tasks.of_run(handle.run_id)))[
                    0
                ].status != "running":
                    await asyncio.sleep(0.01)  # claimed: it runs, held in the step
            assert await _waiting_text(cpu, handle.run_id) == waiting
            released.set()
            assert await handle.result(timeout=WAIT) == "trained"
