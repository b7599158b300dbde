"""`celery -A cairn.celery.worker worker`: a Celery worker for cairn, configured outside code.

The broker is CAIRN_BROKER_URL (else [tool.cairn] broker_url), the database
CAIRN_DATABASE_URL (else [tool.cairn] url), the workflow modules CAIRN_MODULES (else
[tool.cairn] modules), the step queues it serves CAIRN_STEP_QUEUES (a comma list; their
attempts come on Celery queues "cairn.step.NAME"). Without `-Q` it takes every run:
the Celery queue "cairn" (runs on no workflow queue), and "cairn.NAME" of each workflow
queue NAME as runs appear there (consuming.py); `-Q cairn.NAME` takes only the runs of
workflow queue NAME. Celery's `-c N` sets how many runs it executes at once. CAIRN_BROKER_TIMEOUT
bounds each broker call (seconds, default 10; see broker.py). Add `--without-heartbeat`
(and `--without-gossip --without-mingle`) as `cairn worker --transport celery` does.
"""

from __future__ import annotations

import os

from cairn.celery import app as _make_app

_STEP_QUEUES = [q.strip() for q in os.environ.get("CAIRN_STEP_QUEUES", "").split(",") if q.strip()]

app = _make_app(step_queues=_STEP_QUEUES)
