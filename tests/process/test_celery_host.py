"""cairn.celery's Host (the engine inside a Celery worker) around its stop, without a broker."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.process


def test_celery__a_message_taken_after_the_host_stopped_is_refused_not_hung(
    tmp_path: Path,
) -> None:
    # A message Celery's pool starts while the worker shuts down (it was prefetched) must
    # not reopen the engine on the stopped loop: its thread would wait for ever, and the
    # warm shutdown with it.
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    published: list[Any] = []
    host = Host(lambda: Engine(url, workers=2, polls=False), published.extend, dispatch=0.05)
    host.start()
    host.stop().join(timeout=30)
    answers: list[bool] = []
    taker = threading.Thread(target=lambda: answers.append(host.take("no-such-run", "cairn")))
    taker.daemon = True
    taker.start()
    taker.join(timeout=10)
    assert not taker.is_alive(), "take() after stop() hung"
    assert answers == [False]
    stepper = threading.Thread(target=lambda: answers.append(host.take_step("no-such-task")))
    stepper.daemon = True
    stepper.start()
    stepper.join(timeout=10)
    assert answers == [False, False]
    host._loop.close()  # a worker process exits here; a test closes what the host left
