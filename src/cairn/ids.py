"""Run ids that sort by creation time.

A random (uuid4) id scatters the journal rows of runs created together across the whole
`steps` index, so a shared commit dirties one page per run, and more of them as the
table grows. Ids that start with the creation time keep new runs' rows together.
"""

from __future__ import annotations

import os
import time


def new_run_id() -> str:
    """32 hex characters: 12 of milliseconds since the epoch, then 80 random bits."""
    return f"{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"
