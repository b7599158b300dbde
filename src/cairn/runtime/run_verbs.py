"""The verbs that steer a run, implemented once (declared in runtime/verbs.py)."""

from __future__ import annotations

from typing import Any

from cairn import blobs, ids
from cairn.clock import Clock
from cairn.codecs import coded
from cairn.errors import ChildFailed, InvalidValue, KeyUnavailable, RunFinished, RunNotFound
from cairn.models import EventDelivery, RunStatus
from cairn.names import check_name
from cairn.observability import propagation
from cairn.runtime import blocking, plain_inputs
from cairn.runtime.handle import RunHandle, RunOperations
from cairn.runtime.run_reading import RunReader, storable
from cairn.runtime.run_waiting import RunWaiter
from cairn.serialization import Serializer
from cairn.store.programs import control
from cairn.store.programs import waits as wait_ops
from cairn.store.protocol import Store
from cairn.store.records import RunRecord

# A chain of continue_as_new runs an event follows to its newest run, at most.
_MAX_CHAIN_HOPS = 10_000
_CHILD_FAILED = f"{ChildFailed.__module__}.{ChildFailed.__qualname__}"


class RunVerbs:
    """cancel, pause, resume, retry, restart, fork and send_event, for RunControl.

    resume_hook, the verb that finds its run by a hook's token, is on RunControl itself
    (runtime/hooks.py takes the whole RunControl). The handles the verbs answer with act
    through `handles` (the RunControl).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock,
        serializer: Serializer,
        reader: RunReader,
        waiter: RunWaiter,
        handles: RunOperations,
    ) -> None:
        self.store = store
        self.clock = clock
        self.serializer = serializer
        self.reader = reader
        self.waiter = waiter
        self.handles = handles

    async def send_event(
        self, run_id: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """Send an event to a run; it is kept until a wait of the run takes it.

        Event `name` is consumed by the run's next wait for it. A run that continued as
        new passes the event on to the newest run of its chain. Only a wait for `name`
        wakes the run: sent while it waits for something else, the event is kept for a
        later wait, and the answer says so (`EventDelivery.note`).

        Raises:
            RunNotFound: no run has that id.
            RunFinished: the run (the newest of its chain) has already finished, unless
                it had an event of this `idempotency_key` already (a retried send): that
                returns with `repeated` set.
        """
        check_name(name, "event name")
        if idempotency_key is not None:
            check_name(idempotency_key, "idempotency_key")
        storable(run_id)
        text = await blobs.dumps_async(self.serializer, payload, what=f"payload of event {name!r}")
        unless = plain_inputs.unless_sealed(self.serializer)
        for _ in range(_MAX_CHAIN_HOPS):
            delivery = await self.store.write(
                wait_ops.send_message(
                    run_id,
                    f"event:{name}",
                    text,
                    idempotency_key=idempotency_key,
                    now=self.clock.now(),
                    unless_sealed=unless,
                )
            )
            if delivery is None:
                raise RunNotFound(run_id)
            if delivery.sealed is not None:  # this process cannot encrypt: nothing written
                what = f"the payload of event {name!r}"
                plain_inputs.refuse_sealed(delivery.sealed, run_id, what=what)
                # Offloaded arguments: their blob says (a read more, for such runs only).
                await plain_inputs.refuse_plain(self, run_id, what=what)
                unless = None  # not encrypted: send it as any sender would
                continue
            unless = plain_inputs.unless_sealed(self.serializer)  # the next run of a chain
            status = RunStatus(delivery.status)
            if delivery.repeated:  # a retry of a send this run took: the same delivery,
                return EventDelivery(run_id, name, status, False, repeated=True)  # not passed on
            if status is RunStatus.CONTINUED:
                successor = (await self.reader.record(run_id)).continued_to
                if successor:
                    run_id = successor  # nothing was queued on the ended run: follow the chain
                    continue
            if status.finished:
                raise RunFinished(run_id, status.value)
            if delivery.woken:
                self.waiter.wake_local()
            waits = blocking.channels_in_words(delivery.waits_on or ())
            return EventDelivery(run_id, name, status, delivery.woken, waits)
        raise RunFinished(run_id, RunStatus.CONTINUED.value)

    async def _control(self, run_id: str, action: str) -> RunStatus:
        storable(run_id)
        status = await self.store.write(control.control_run(run_id, action, now=self.clock.now()))
        if status is None:
            raise RunNotFound(run_id)
        local = self.waiter.local  # this process's worker, if it has one
        if local is not None:
            local.deliver(run_id, None if action == "resume" else action)
            local.wake()
        if RunStatus(status).finished:
            self.waiter.notify_finished(run_id)
        return RunStatus(status)

    async def cancel(self, run_id: str) -> RunStatus:
        """Cancel a run: it ends CANCELLED at its current or next durable point.

        Cancelled is delivered at once if it sleeps or waits. A finished run is
        unchanged. Returns the status right after.
        """
        return await self._control(run_id, "cancel")

    async def pause(self, run_id: str) -> RunStatus:
        """Pause a run at its next durable point (at once if it sleeps, waits or is queued)."""
        return await self._control(run_id, "pause")

    async def resume(self, run_id: str) -> RunStatus:
        """Resume a paused run; timers and events that came meanwhile are honoured."""
        return await self._control(run_id, "resume")

    async def retry(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Continue a FAILED run from its failed step (completed steps do not run again).

        The run's next execution begins; `by` (who asked) is recorded with it. The failed
        entry and every attempt of the earlier executions stay in the history. A run
        failed by a child it awaited (ChildFailed) has the failed child retried too, the
        same way and under the same id (and its own failed child...): no second child
        starts, and the parent waits for it again.

        Raises:
            RunNotFound: unknown run.
            RunFinished: the run is not FAILED.
            InvalidName: `by` is not a storable name.
        """
        by = _who(by)
        run = await self.reader.record(run_id)
        retried = control.retry_run(
            run_id, now=self.clock.now(), by=by, child_failed=self._failed_by_child
        )
        if not await self.store.write(retried):
            raise RunFinished(run_id, f"{run.status}; only FAILED runs can be retried")
        self.waiter.wake_local()
        return RunHandle(self.handles, run_id)

    def _failed_by_child(self, run_id: str, error: str | None) -> bool:
        """True if a run's stored error is a ChildFailed (its type read with our keys).

        Raises:
            KeyUnavailable: it is encrypted with a key this process lacks. Guessing
                either way would be wrong: a parent requeued alone meets its child's
                failure again at once, and a child whose failure the parent caught
                would run again though nothing awaits it.
        """
        try:
            found = coded.unseal_json(self.serializer, error)
        except KeyUnavailable as exc:
            raise KeyUnavailable(
                f"cannot retry run {run_id!r}: its error is encrypted with key "
                f"{exc.key_id!r}, which this process lacks, so whether its child's failure "
                "failed it (and that child is to be retried too) cannot be told; give this "
                "process the key (CAIRN_KEYS, see docs/howto/encryption.md)",
                key_id=exc.key_id,
            ) from exc
        except Exception:  # not JSON: not a ChildFailed
            return False
        return isinstance(found, dict) and found.get("type") == _CHILD_FAILED

    async def restart(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Start a new run of the same workflow with the same input.

        The new run records that it restarts `run_id`, and who asked (`by`).
        """
        by = _who(by)
        run = await self.reader.record(run_id)
        return await self._copy(run, before_seq=None, by=by, origin="restart")

    async def fork(self, run_id: str, from_step: int, *, by: str | None = None) -> RunHandle:
        """Start a new run reusing the recorded steps before a chosen history entry.

        The recorded outcomes before history entry `from_step` are reused. The new run
        records that it forks `run_id` at `from_step`, and who asked (`by`).
        """
        if not isinstance(from_step, int) or from_step < 1:
            raise InvalidValue(f"from_step must be a history seq (1 or more), got {from_step!r}")
        by = _who(by)
        run = await self.reader.record(run_id)
        return await self._copy(run, before_seq=from_step, by=by, origin="fork")

    async def _copy(
        self, run: RunRecord, *, before_seq: int | None, by: str | None, origin: str
    ) -> RunHandle:
        now = self.clock.now()
        copy = RunRecord(
            run_id=ids.new_run_id(),
            workflow=run.workflow,
            status=RunStatus.PENDING.value,
            args=run.args,
            created_at=now,
            updated_at=now,
            max_recoveries=run.max_recoveries,
            queue=run.queue,
            priority=run.priority,
            partition_key=run.partition_key,
            trace_context=propagation.current(),
            restarted_from=run.run_id if before_seq is None else None,
            forked_from=run.run_id if before_seq is not None else None,
            forked_from_seq=before_seq,
            origin=origin,
        )
        await self.store.write(
            control.copy_run(copy, run.run_id, before_seq=before_seq, by=by, now=now)
        )
        self.waiter.wake_local()
        return RunHandle(self.handles, copy.run_id)


def _who(by: str | None) -> str | None:
    """`by` checked: None, or a name (at most 255 characters) of who asked."""
    return None if by is None else check_name(by, "by")
