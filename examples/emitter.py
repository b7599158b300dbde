"""The emitter pattern: a scheduled workflow fans records out to one processor run each.

Every tick of a schedule, ``feeds.poll`` fetches the records waiting in a feed (here a
JSON file named by ``EMITTER_FEED``, default ``emitter-feed.json``, standing in for an API
or a bucket) and emits one ``record.received`` event per record, keyed by the record's id.
``records.process`` subscribes to that event type, so each record gets its own run, with
its own retries, history and failure, and a slow record never holds up the others.

The key makes a record that is fetched again (the feed is read whole on every tick)
start nothing new: each record is processed exactly once. Processing appends one line to
``EMITTER_OUT`` (default ``emitter-out.jsonl``), the side effect a customer would see.

Try it (a tick every 5 seconds; add records to the feed file while it runs)::

    echo '[{"id": "r-1", "amount": 12}, {"id": "r-2", "amount": 30}]' > emitter-feed.json
    python -m examples.emitter --db sqlite:///emitter.db --seconds 12

Child runs are the other way to fan out (``await cairn.start_child(process_record,
record)``): use them when the poller must wait for the results and each batch is new;
use ``emit`` when records may come again, or other workflows may want them too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

import cairn


def feed_path() -> str:
    """Where the feed is read from."""
    return os.environ.get("EMITTER_FEED", "emitter-feed.json")


def out_path() -> str:
    """Where processed records are written."""
    return os.environ.get("EMITTER_OUT", "emitter-out.jsonl")


@cairn.step(retries=cairn.Retry(max_attempts=5, delay="1s"))
async def fetch_records() -> list[dict[str, Any]]:
    """Every record in the feed (an empty feed if the file does not exist yet)."""
    try:
        with open(feed_path(), encoding="utf-8") as feed:
            records: list[dict[str, Any]] = json.load(feed)
    except FileNotFoundError:
        return []
    return records


@cairn.workflow(name="feeds.poll")
async def poll_feed() -> list[str]:
    """Fetch the feed and emit one event per record; the ids of the runs started."""
    records = await fetch_records()
    started: list[str] = []
    for record in records:
        # Keyed by the record's id: a record seen on an earlier tick starts nothing new
        # and returns the run it started then.
        started += await cairn.emit("record.received", record, key=str(record["id"]))
    cairn.set_columns(records=len(records))
    return started


@cairn.step()
async def store_record(record: dict[str, Any]) -> str:
    """The side effect: write the processed record out."""
    line = {"id": record["id"], "amount": record.get("amount"), "pid": os.getpid()}
    with open(out_path(), "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    return str(record["id"])


@cairn.workflow(name="records.process", on="record.received")
async def process_record(record: dict[str, Any]) -> str:
    """One record, one run: started by each `record.received` event."""
    cairn.set_columns(record_id=str(record["id"]))
    return await store_record(record)


POLL = cairn.schedule(poll_feed, every="5s", overlap="skip", catchup="1m", id="feeds.poll")
"""Poll every 5 seconds; a poll still running when the next tick comes makes it skip."""


def processed(path: str | None = None) -> list[dict[str, Any]]:
    """The records written so far, oldest first."""
    try:
        with open(path or out_path(), encoding="utf-8") as out:
            return [json.loads(line) for line in out if line.strip()]
    except FileNotFoundError:
        return []


async def serve(url: str | None, seconds: float) -> None:
    """Run an engine (and so the schedule) for `seconds`, then show what was processed."""
    async with cairn.Engine(url):
        await asyncio.sleep(seconds)
    for line in processed():
        print(f"processed {line['id']} (amount {line['amount']})")


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m examples.emitter [--db URL] [--seconds N]`."""
    parser = argparse.ArgumentParser(prog="python -m examples.emitter", description=__doc__)
    parser.add_argument("--db", default=None, help="database URL (default: CAIRN_DATABASE_URL)")
    parser.add_argument("--seconds", type=float, default=12.0, help="how long to run (12)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.db, args.seconds))


if __name__ == "__main__":
    main()
