"""LiveWaits: a live run's durable waits (sleeps, events, hooks, human tasks, receive).

One of the parts LiveRun (core/live_run.py) holds, made with the run's LiveSteps
(core/live_steps.py), through which each wait reads and commits the journal. Where a
sleep wakes: a sleep not yet due parks the run (`LiveAttempt.timer`), and the worker's
claim picks it up at its time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from cairn.authoring.hook import Hook
from cairn.core import journal, mailbox, waits
from cairn.core.live_attempt import as_datetime
from cairn.core.live_steps import LiveSteps
from cairn.store.records import StepRecord


class LiveWaits:
    """Durable waits: each decides (take, time out or park) and parks the run when not due."""

    def __init__(self, steps: LiveSteps) -> None:
        self.steps = steps
        self.attempt = steps.attempt
        self.journal = steps.journal
        self.env = steps.env
        self.run = steps.run
        self.deliver = steps.deliver

    async def _sleep_until_ts(self, wake_at: float, name: str | None) -> None:
        key = self.journal.next_key(journal.sleep_name(name))
        record = self.journal.take(key, "sleep")
        if record is None:
            await self.journal.check_new_work(journal.started("sleep", key))
            await self.steps.point(key)
            now = self.env.clock.now()
            decided = self.attempt.deciding()  # the run parks once this sleep has its wake time
            try:
                await self._commit_sleep(key, now, wake_at, name)
            finally:
                self.attempt.decided(decided)
        else:
            wake_at = float(json.loads(record.result or "0"))
        if wake_at - self.env.clock.now() <= 0:
            return
        await self.steps.point(key)
        # Every sleep parks the run, however short: it is SLEEPING for everyone to see,
        # holds no slot, and a pause or cancel meets it where the database says it is.
        raise self.attempt.timer(key, wake_at)

    async def _commit_sleep(self, key: str, now: float, wake_at: float, name: str | None) -> None:
        await self.steps.commit_step(
            StepRecord(
                run_id=self.run.run_id,
                seq=self.journal.allocate_seq(),
                key=key,
                kind="sleep",
                name=name or "sleep",
                status="completed",
                attempts=1,
                started_at=now,
                finished_at=now,
                result=json.dumps(wake_at),
            )
        )

    def sleep(self, seconds: float, name: str | None = None) -> Any:
        """Durable sleep for `seconds`."""
        return self.deliver(self._sleep_until_ts(self.env.clock.now() + seconds, name))

    def sleep_until(self, when: datetime, name: str | None = None) -> Any:
        """Durable sleep until `when` (naive datetimes are taken as UTC)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return self.deliver(self._sleep_until_ts(when.timestamp(), name))

    def wait_for_event(self, name: str, timeout: float | None, default: Any) -> Any:
        """The payload of the next event `name` sent to this run."""
        return self.deliver(waits.wait_for_event(self.steps, name, timeout, default))

    def receive(self, topic: str, max_messages: int, timeout: float | None) -> Any:
        """Up to `max_messages` queued events `topic` (see core/mailbox.py)."""
        return self.deliver(mailbox.receive(self.steps, topic, max_messages, timeout))

    def create_hook(self, name: str, timeout: float | None, schema: Any) -> Any:
        """A new single-use Hook (an awaitable in async workflows, the Hook in sync ones)."""
        return self.deliver(self._create_hook(name, timeout, schema))

    async def _create_hook(self, name: str, timeout: float | None, schema: Any) -> Hook:
        token, deadline, record = await waits.open_hook(self.steps, name, timeout, schema)
        if token:
            self.steps.hook_tokens.add(token)
        expires = as_datetime(deadline)
        return Hook(
            name,
            token,
            expires,
            lambda: self.deliver(waits.await_hook(self.steps, name, record, schema)),
        )

    def human_task(
        self,
        name: str,
        title: str,
        data: Any,
        form: Any,
        assignee: str | None,
        timeout: float | None,
    ) -> Any:
        """Create a task for a person and wait for the submitted values."""
        coro = waits.human_task(self.steps, name, title, data, form, assignee, timeout)
        return self.deliver(coro)
