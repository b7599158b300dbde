"""Which workflow names a run may be started under, and what is said about the others.

A start by name is accepted when this process registers the name, or when a worker seen
within the window (7 days by default) executes it: workers away for a deploy keep their
names known. Any other name is refused with UnknownWorkflow and the closest known names,
since a misspelt one would wait PENDING forever; `allow_unknown=True` queues it anyway.
"""

from __future__ import annotations

import time

from cairn.authoring.registry import Registry
from cairn.errors import UnknownWorkflow
from cairn.observability import logcontext
from cairn.runtime import leases
from cairn.store.programs import workers as worker_ops
from cairn.store.protocol import Store

log = logcontext.logger("cairn.control")

WORKERS_FRESH = 5.0  # seconds a look at the workers serves starts by known names
DEFAULT_WINDOW = 7 * 24 * 3600.0  # seconds a worker's workflows stay known after it was seen


class WorkflowNames:
    """The names a start may use: this process's registry and what workers knew lately."""

    def __init__(self, store: Store, registry: Registry, *, window: float = DEFAULT_WINDOW) -> None:
        self.store = store
        self.registry = registry
        self.window = window
        # (when read, names known to workers): a burst of starts by known names reads the
        # workers once every WORKERS_FRESH seconds; an unknown name is always read afresh.
        self._known: tuple[float, set[str] | None] | None = None
        self._live: tuple[float, set[str] | None] | None = None
        # name -> (when read, its queue and max_recoveries as its workers declare them)
        self._declared: dict[str, tuple[float, tuple[str | None, int]]] = {}

    async def declare(self) -> None:
        """Store the queue and max_recoveries of each durable workflow this process imports.

        Called by an engine with workers as it opens: runs started by those names in a
        process without the code (`declared`) then get them too.
        """
        found = [
            (wf.name, wf.queue, wf.max_recoveries)
            for wf in self.registry.workflows.values()
            if wf.durable
        ]
        if found:  # none: no transaction at all
            await self.store.write(worker_ops.declare_workflows(found))

    async def declared(self, name: str) -> tuple[str | None, int] | None:
        """The (queue, max_recoveries) the workers of `name` declared, or None if none did.

        Read once every WORKERS_FRESH seconds per name, for a burst of starts.
        """
        cached = self._declared.get(name)
        if cached is not None and time.monotonic() - cached[0] <= WORKERS_FRESH:
            return cached[1]
        found = await self.store.read(worker_ops.declared_workflow(name))
        if found is not None:  # only names workers declared: a bounded set
            self._declared[name] = (time.monotonic(), found)
        return found

    async def check(self, name: str) -> None:
        """Return if a run of `name` can be started; else raise UnknownWorkflow.

        Raises:
            UnknownWorkflow: neither this process nor a worker seen within the window
                knows `name`; it names the closest known names.
        """
        if name in self.registry.workflows:
            return
        now = time.monotonic()
        if self._known is not None and now - self._known[0] <= WORKERS_FRESH:
            known = self._known[1]
            if known is None or name in known:
                return
        known = await self.store.read(worker_ops.known_workflows(self.window))
        self._known = (time.monotonic(), known)
        if known is None or name in known:
            return
        everything = sorted(known | set(self.registry.workflows))
        raise UnknownWorkflow(
            workflow=name,
            suggestions=tuple(closest(name, everything)),
            seen_within=span(self.window),
        )

    async def warn_if_no_live_worker(self, name: str, run_id: str) -> None:
        """Log a warning when live workers exist and none can execute workflow `name`.

        Queuing for workers that start later is normal, so with no live worker this says
        nothing; but a run of a name no live worker knows would otherwise wait in silence.
        """
        now = time.monotonic()
        if self._live is None or now - self._live[0] > WORKERS_FRESH:
            self._live = (
                now,
                leases.known_workflows(await self.store.read(worker_ops.list_workers())),
            )
        known = self._live[1]
        if known is not None and name not in known:
            log.warning(
                "run %s: no live worker executes workflow %r, so it stays PENDING until one "
                "that imports it starts (live workers know: %s)",
                run_id,
                name,
                ", ".join(sorted(known)) or "no workflows",
            )


def closest(name: str, known: list[str], *, limit: int = 3) -> list[str]:
    """The known names most like `name`: a typo's fix, or the qualified form of a short name.

    Only names about as close as the closest one are offered: siblings that merely share a
    module prefix (`shop.refund` for `shop.chekout`) are not.
    """
    found = [k for k in known if k.rsplit(".", 1)[-1] == name and k != name]
    import difflib  # only for a name nobody knows

    scored = []
    for candidate in known:
        matcher = difflib.SequenceMatcher(None, name, candidate)
        if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
            score = matcher.ratio()
            if score >= 0.6:
                scored.append((score, candidate))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    best = scored[0][0] if scored else 0.0
    for score, candidate in scored:
        if score >= best - 0.1 and candidate not in found:
            found.append(candidate)
    return found[:limit]


def span(seconds: float) -> str:
    """A window as people say it: `7 days`, `12 hours`, `90 seconds`."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds:g} seconds"
