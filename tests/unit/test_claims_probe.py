"""`claims.idle_probe` against `claims.claim_runs`: the probe reads what an idle claim reads.

PostgreSQL asks the probe's reads first and, when none finds a row, answers an empty claim
without running `claim_runs` at all. That is right only while a claim that finds no
candidate makes exactly those reads and writes nothing; a reordered or added statement in
`claim_runs` fails here instead of silently changing what an idle PostgreSQL claim does.
"""

from __future__ import annotations

import pytest

from cairn.store.programs import claims
from cairn.store.programs.base import Sql
from cairn.store.records import Claimed

FILTERS = [
    {},
    {"queues": ["payments", "mail"]},
    {"workflows": ["order"], "only": ["r1", "r2"]},
    {"queues": ["q"], "workflows": ["a", "b"], "only": ["r1"]},
]


def idle_reads(**options):
    """The requests `claim_runs` makes when every read comes back empty, and its answer."""
    program = claims.claim_runs("w1", 5, **options)
    made: list[Sql] = []
    try:
        request = next(program)
        while True:
            made.append(request)
            request = program.send([])
    except StopIteration as done:
        return made, done.value


def without_limit(reads):
    # The row limit is the one parameter that differs: a claim reads as many rows as it
    # has room for, the probe asks whether one exists.
    return sorted((r.text, tuple(r.params[:-1])) for r in reads)


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("orphans_first", [False, True])
@pytest.mark.parametrize("stale", [False, True])
def test_idle_probe__is_what_a_claim_finding_nothing_reads(filters, orphans_first, stale):
    made, claimed = idle_reads(now=100.0, stale=stale, orphans_first=orphans_first, **filters)
    assert claimed == Claimed([], {}, {})
    assert all(isinstance(r, Sql) and r.fetch == "all" and r.lock for r in made), (
        "an idle claim only reads candidates (locking them): it writes nothing"
    )
    probe = claims.idle_probe("w1", 100.0, stale, **filters)
    assert without_limit(made) == without_limit(probe)
    assert all(r.params[-1] >= 1 for r in probe)
