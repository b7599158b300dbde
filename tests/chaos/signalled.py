"""A worker process under test that is stopped by a signal, and how long it took to exit."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path


class SignalledProcess:
    """A subclass sets `proc` (the process) and `log` (the file its output goes to)."""

    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: signal.Signals, *, again_after: float | None = None) -> float:
        """Send `sig` (twice, with `again_after`); seconds until the process exited."""
        started = time.monotonic()
        self.proc.send_signal(sig)
        if again_after is not None:
            time.sleep(again_after)
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running 90 s after {sig.name}:\n{self.text()}") from None
        took = time.monotonic() - started
        print(f"exited {took:.1f} s after {sig.name}{' (twice)' if again_after else ''}")
        return took
