"""The listing tables at 80 columns with the long, dotted names real projects use.

Names like `exchange.workflows.order_fulfilment.process_order_with_retries` differ at
their end: cut at the end, every row of `cairn runs list` read `exchange.workfl…`, and
`workflows list` and `hooks list` folded each row over three or four lines.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from cairn.cli import hooks, output, workflows
from cairn.models import RunStatus, RunSummary
from cairn.runtime.catalog import WorkflowInfo
from cairn.runtime.hooks import HookInfo

NOW = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
NAMES = [
    "exchange.workflows.order_fulfilment.process_order_with_retries",
    "exchange.workflows.onboarding.reminder_sequence_drip_campaign",
    "exchange.workflows.hooks.wait_for_payment_provider_callback",
]
SCHEDULED = "sched:every-five-minutes-settlement-poll:2026-11-30T05:50:00Z"


def rendered(table: object, width: int = 80) -> list[str]:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(table)
    return captured.get().splitlines()


def test_runs_table__long_workflow_names_keep_their_ends_at_80_columns() -> None:
    runs = [
        RunSummary(
            run_id=f"01a22afd58ef6d0d5334c15e3ae6f0a{i}" if i else SCHEDULED,
            workflow=name,
            status=RunStatus.FAILED,
            created_at=NOW,
            updated_at=NOW,
        )
        for i, name in enumerate(NAMES)
    ]
    lines = rendered(output.runs_table(runs[1:]))  # generated ids: one line a run
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) == 1 + len(runs[1:])
    for line, name in zip(lines[1:], NAMES[1:], strict=True):
        assert name.rpartition(".")[2][-7:] + "  " in line, line  # the end that differs
    assert lines[1].startswith("01a22afd58ef6d0d5334c15e3ae6f0a1  ")  # a generated id whole

    # A scheduled run's id is too long to show whole beside the rest: every id takes a
    # line of its own (it was cut to `sched:ever…:2026-11-30T05:50:00Z`, no use to
    # `cairn runs show`), the rest of its row below it.
    lines = rendered(output.runs_table(runs))
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0] == "RUN ID" and len(lines) == 2 + 2 * len(runs)
    assert [lines[2], lines[4]] == [SCHEDULED, "01a22afd58ef6d0d5334c15e3ae6f0a1"]
    for line, name in zip(lines[3::2], NAMES, strict=True):
        assert line.startswith("  ") and name.rpartition(".")[2][-16:] + "  " in line, line


def test_workflows_table__one_line_per_workflow_at_80_columns() -> None:
    infos = [
        WorkflowInfo(
            name=name,
            queue="payment-provider-settlements" if i == 0 else None,
            version=None,
            on=None,
            durable=True,
            local=True,
            workers=("ip-10-0-12-34:21523:1b02fc5bf780",),
        )
        for i, name in enumerate(NAMES)
    ]
    lines = rendered(workflows.workflows_table(infos))
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) == 1 + len(infos), lines
    assert lines[0].startswith("NAME") and "KNOWN BY" in lines[0]
    for line, name in zip(lines[1:], NAMES, strict=True):
        assert name[-12:] in line and "local, ip-10-0" in line


def test_hooks_table__one_line_per_hook_with_the_whole_token_at_80_columns() -> None:
    infos = [
        HookInfo(
            run_id="01a22afd7c717f78f7a922f7996769e3",
            name="payment_provider_webhook_callback",
            created_at=NOW,
            expires_at=NOW,
            token=f"ASYRybakNLF--YYkBCj7Ok-5_bVqMQ-{i}",
        )
        for i in range(2)
    ]
    lines = rendered(hooks.hooks_table(infos))
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) == 3, lines
    for i, line in enumerate(lines[1:]):
        assert line.startswith(f"ASYRybakNLF--YYkBCj7Ok-5_bVqMQ-{i}  payment")
        assert "_callback" in line and "9e3" in line  # the hook's and the run's ends


def test_check_tables__one_line_per_workflow_at_80_columns() -> None:
    from cairn.cli import check

    rows = [
        {"name": name, "function": f"exchange_fulfilment.fn_{i}", "queue": None, "on": None}
        for i, name in enumerate(NAMES)
    ]
    [_, table, _] = check._table("workflows", rows, ["name", "function", "queue", "on"])
    lines = rendered(table)
    assert all(len(line) <= 80 for line in lines), lines
    assert len(lines) == 1 + len(rows), lines
    assert lines[0].split() == ["NAME", "FUNCTION"]  # QUEUE and ON: no row has one
    for line, name in zip(lines[1:], NAMES, strict=True):
        assert name[-12:] in line


def test_queues_table__every_limit_whole_at_80_columns_beside_a_long_name() -> None:
    from cairn.cli import queues
    from cairn.runtime.queues import QueueInfo

    long = "inbound-webhooks-from-payment-provider-eu-west-1-partitioned"
    infos = [
        QueueInfo(long, concurrency=4, per_worker=None, rate="100/60s", partition_concurrency=1)
    ]
    lines = rendered(queues.queues_table(infos))
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].split() == ["QUEUE", "CONCURRENCY", "PER", "WORKER", "RATE", "PER", "PARTITION"]
    assert lines[1].split()[1:] == ["4", "none", "100/60s", "1"]  # before: "CONC…", "…"
    assert lines[1].split()[0].endswith("u-west-1-partitioned")
