"""The garbage collector's settings while an engine executes runs: fewer, cheaper passes.

A step allocates hundreds of short-lived objects, so with Python's default threshold
(a pass every 700 new containers) the collector runs every few steps and, every few of
those, walks every object the process holds. While at least one engine with workers is
open (and `Engine(tune_gc=False)` was not asked for), the objects alive when it opened
are frozen (`gc.freeze()`: never walked again) and a young pass waits for
`YOUNG_THRESHOLD` new containers. The last such engine to close restores both. The
collector is one per process, so this state is too.
"""

from __future__ import annotations

import gc

# New containers between young passes while tuned (Python's default is 700).
YOUNG_THRESHOLD = 10_000

_holders = 0
_restore: tuple[int, int, int] | None = None  # the thresholds to put back
_froze = False  # whether the freeze is ours to undo


def hold() -> None:
    """An engine starts executing runs: tune the collector unless another engine did."""
    global _holders, _restore, _froze
    _holders += 1
    if _holders > 1:
        return
    young, middle, old = _restore = gc.get_threshold()
    # A process that froze objects itself manages freezing: leave it alone.
    _froze = gc.get_freeze_count() == 0
    if _froze:
        # Garbage among the frozen objects waits for `release` to be collected.
        gc.freeze()
    if young > 0:  # 0 means the process switched collection off: keep it so
        gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)


def release() -> None:
    """An engine stopped executing runs: the last one restores the collector's settings."""
    global _holders, _restore, _froze
    if _holders == 0:
        return
    _holders -= 1
    if _holders > 0:
        return
    if _restore is not None:
        gc.set_threshold(*_restore)
        _restore = None
    if _froze:
        gc.unfreeze()  # the frozen objects join the oldest generation again
        _froze = False
