"""What drives runs forward in a process: engine, workers, leases and run control."""

from __future__ import annotations

from cairn.runtime import direct_calls

# The one place a transient workflow called outside any run learns how to execute.
direct_calls.install()
