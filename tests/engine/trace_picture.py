"""The trace picture of docs/howto/observability.md: `python -m tests.engine.trace_picture`.

It runs a real order on a fresh SQLite database with `tracing=True`, inside a
`POST /orders` span, and collects the spans the OpenTelemetry SDK exports: the charge
fails once and is retried, a child run sends the receipt, the run sleeps, then ships.
The spans are drawn as a waterfall (the view Jaeger gives) and photographed in
Chromium (/usr/bin/chromium) into docs/images/trace.png; the console exporter's JSON of
the same spans is written beside it (docs/images/trace.json) so the picture can be
checked against the raw output.
"""

from __future__ import annotations

import asyncio
import html
import io
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cairn
from cairn.authoring.step import make_step
from cairn.authoring.workflow import make_workflow

OUT = Path(__file__).resolve().parents[2] / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
SHOWN = ("cairn.run_id", "cairn.step.attempt", "cairn.outcome", "error.type", "cairn.run.attempt")


def declare(registry: cairn.Registry) -> None:
    """The order workflow of the how-to, with a child that mails the receipt."""
    tries = {"charge": 0}

    async def charge(order: str) -> str:
        tries["charge"] += 1
        if tries["charge"] == 1:
            raise ConnectionError("gateway timeout")
        return f"ch_{order}"

    async def reserve(order: str) -> int:
        return 3

    async def mail(order: str) -> str:
        return f"receipt for {order} sent"

    async def dispatch(order: str) -> str:
        return f"parcel {order}"

    retry = cairn.Retry(max_attempts=3, delay=0.05, jitter=0)
    charge_card = make_step(charge, "charge_card", retry, None, registry)
    reserve_stock = make_step(reserve, "reserve_stock", None, None, registry)
    send_mail = make_step(mail, "send_mail", None, None, registry)
    ship = make_step(dispatch, "ship", None, None, registry)

    async def receipt(order: str) -> str:
        return await send_mail(order)

    receipt_workflow = make_workflow(receipt, name="orders.receipt", reg=registry)

    async def process(order: str) -> str:
        await reserve_stock(order)
        await charge_card(order)
        await cairn.start_child(receipt_workflow, order)
        await cairn.sleep(0.2)
        return await ship(order)

    make_workflow(process, name="orders.process", reg=registry)


async def run_order(url: str) -> None:
    registry = cairn.Registry()
    declare(registry)
    tracer = trace.get_tracer("shop.web")
    async with cairn.Engine(url, registry=registry, tracing=True) as engine:
        with tracer.start_as_current_span("POST /orders"):
            run = await engine.start("orders.process", "o-1042")
        await run.result(timeout=30)
        for summary in await engine.list_runs(workflow="orders.receipt"):
            await (await engine.get(summary.run_id)).result(timeout=30)


def waterfall(spans: Sequence[ReadableSpan]) -> str:
    """An HTML page drawing `spans` (one trace) as a tree of bars along a time axis."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    start = min(s.start_time or 0 for s in spans)
    end = max(s.end_time or 0 for s in spans)
    total = max(end - start, 1)
    rows: list[str] = []

    def draw(span: ReadableSpan, depth: int) -> None:
        left = ((span.start_time or 0) - start) / total * 100
        width = max(((span.end_time or 0) - (span.start_time or 0)) / total * 100, 0.25)
        failed = span.status.status_code is trace.StatusCode.ERROR
        attrs = dict(span.attributes or {})
        facts = " ".join(
            f"<span class=k>{html.escape(k)}</span>={html.escape(str(attrs[k]))}"
            for k in SHOWN
            if k in attrs
        )
        marks = "".join(
            f'<i class=ev style="left:{((e.timestamp - start) / total * 100):.2f}%" '
            f'title="{html.escape(e.name)}"></i><b class=evn style="left:'
            f'{((e.timestamp - start) / total * 100):.2f}%">{html.escape(e.name)}</b>'
            for e in span.events
            if e.name != "exception"
        )
        millis = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        rows.append(
            f'<div class="row{" err" if failed else ""}">'
            f'<div class=name style="padding-left:{depth * 18 + 8}px">{html.escape(span.name)}'
            f"<div class=facts>{facts}</div></div>"
            f'<div class=lane><div class=bar style="left:{left:.2f}%;width:{width:.2f}%"></div>'
            f'{marks}<span class=ms style="{_label_place(left, width)}">'
            f"{_duration(millis)}</span></div></div>"
        )
        for child in sorted(by_parent.get(span.context.span_id, []), key=_start):  # type: ignore[union-attr]
            draw(child, depth + 1)

    for root in sorted(by_parent.get(None, []), key=_start):
        draw(root, 0)
    trace_id = f"{spans[0].context.trace_id:032x}" if spans[0].context else ""
    return _PAGE.format(
        trace_id=trace_id, count=len(spans), total=f"{total / 1e6:.0f}", rows="\n".join(rows)
    )


def _label_place(left: float, width: float) -> str:
    """CSS placing a bar's label after it, or before it when the bar ends near the edge."""
    if left + width > 85:
        return f"right:{100 - left:.2f}%;margin-right:6px"
    return f"left:{left + width:.2f}%;margin-left:6px"


def _duration(millis: float) -> str:
    return f"{millis:.1f} ms" if millis >= 1 else f"{millis * 1000:.0f} µs"


def _start(span: ReadableSpan) -> int:
    return span.start_time or 0


_PAGE = """<!doctype html><meta charset=utf-8><style>
body {{ font: 13px system-ui, sans-serif; margin: 0; background: #fff; color: #1d2330; }}
header {{ padding: 12px 16px; background: #1d2330; color: #fff; }}
header small {{ color: #aab3c5; margin-left: 12px; }}
.row {{ display: grid; grid-template-columns: 430px 1fr; border-bottom: 1px solid #e6e9ef;
  min-height: 38px; }}
.name {{ padding: 5px 8px; font-weight: 600; border-right: 1px solid #e6e9ef; }}
.facts {{ font: 11px ui-monospace, monospace; font-weight: 400; color: #566074; }}
.k {{ color: #8a94a8; }}
.lane {{ position: relative; }}
.bar {{ position: absolute; top: 11px; height: 14px; background: #4c7bd9; border-radius: 2px; }}
.err .bar {{ background: #d9534c; }} .err .name {{ color: #b02a24; }}
.ms {{ position: absolute; top: 11px; font-size: 11px; color: #566074; }}
.ev {{ position: absolute; top: 6px; width: 2px; height: 24px; background: #e0a030; }}
.evn {{ position: absolute; top: 26px; margin-left: 4px; font: 10px monospace; color: #a06a00; }}
</style>
<header>Trace {trace_id}<small>{count} spans, {total} ms, exported by the OpenTelemetry SDK
from cairn (tracing=True)</small></header>
{rows}
"""


async def main() -> int:
    memory = InMemorySpanExporter()
    console = io.StringIO()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=console)))
    trace.set_tracer_provider(provider)
    with tempfile.TemporaryDirectory(prefix="cairn-trace-") as folder:
        await run_order(f"sqlite:///{Path(folder) / 'shop.db'}")
    spans = memory.get_finished_spans()
    page = waterfall(spans)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "trace.json").write_text(
        json.dumps([json.loads(s.to_json()) for s in spans], indent=2) + "\n"
    )
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM)
        page_ = await browser.new_page(viewport={"width": 1360, "height": 400})
        await page_.set_content(page)
        await page_.screenshot(path=str(OUT / "trace.png"), full_page=True)
        await browser.close()
    print(f"{len(spans)} spans -> {OUT / 'trace.png'} and {OUT / 'trace.json'}")
    print(console.getvalue()[:400] + "...", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
