"""`celery -A cairn.celery.worker worker`: a Celery worker for cairn, configured outside code.

The broker is CAIRN_BROKER_URL (else [tool.cairn] broker_url), the database
CAIRN_DATABASE_URL (else [tool.cairn] url), the workflow modules CAIRN_MODULES (else
[tool.cairn] modules). It consumes the Celery queue "cairn" (runs on no workflow queue);
`-Q cairn.NAME` takes the runs of workflow queue NAME instead. Celery's `-c N` sets how
many runs it executes at once.
"""

from __future__ import annotations

from cairn.celery import app as _make_app

app = _make_app()
