"""JSON log lines: one object per record, run context included (`--log-format json`)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from cairn.observability.logcontext import FIELDS


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON.

    Keys: `time` (ISO 8601, UTC), `level`, `logger`, `message`, then `run_id`,
    `workflow`, `step` and `attempt` (null outside a run; see RunContextFilter), and
    `exception` / `stack` when the record has them. Values JSON cannot hold are written
    with `str()`.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON object, without a newline."""
        data: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            data[name] = getattr(record, name, None)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exception"] = record.exc_text
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return json.dumps(data, default=str, ensure_ascii=False)
