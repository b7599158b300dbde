"""`cairn.patched` / `cairn.deprecate_patch`: changing workflow code under runs in flight.

A patch marker is a journal entry (kind "patch", key `~patch:ID#n`) recorded the first
time a run reaches `patched(ID)` under code that has it. Reaching that point again:

- the marker is recorded: the run took the new path before, so it takes it again (True);
- no marker, and the history goes on past this point: the run passed it under code
  without the patch, so it keeps the old path (False) and records nothing;
- no marker and nothing recorded beyond: the run is at the frontier, it takes the new
  path (True) and the marker is stored before anything the run writes after it.

`deprecate_patch(ID)` decides the same way and fails a run that would take the old path.

Markers never make a replay diverge on their own (a run whose code no longer asks
simply skips them), so old runs that took the new path finish after the call is removed.
"""

from __future__ import annotations

from cairn.core.journal import Journal, op_name
from cairn.errors import NonDeterminismError
from cairn.names import check_name

PATCH = "patch"


def key_of(journal: Journal, change_id: str) -> str:
    """The journal key of this call of `patched(change_id)` in the run."""
    check_name(change_id, "patch id")
    return journal.next_key(op_name(PATCH, change_id))


def decide(journal: Journal, key: str) -> tuple[bool, bool]:
    """(take the new path, a marker must be recorded) for the patch point `key`."""
    if journal.take(key, PATCH) is not None:
        return True, False
    if journal.caught_up():
        return True, True
    return False, False


def predates(change_id: str) -> NonDeterminismError:
    """The error for a run that reaches `deprecate_patch(change_id)` but predates the patch.

    `deprecate_patch` decides like `patched` (and records the marker the same way, so runs
    started under the deprecating code replay on it); only the old path is an error.
    """
    met = f"deprecated patch {change_id!r}"
    return NonDeterminismError(
        f"the run predates patch {change_id!r}, which this code deprecates: it passed this "
        f"point without the patch. Keep cairn.patched({change_id!r}) and its old branch "
        "until `cairn check --db` reports no unfinished run predates it",
        expected=f"the old branch of patch {change_id!r}",
        met=met,
    )
