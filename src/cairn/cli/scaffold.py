"""`cairn init [DIR]`: a starter project with an example workflow, ready to run.

It writes three files and never overwrites one: if any exists, nothing is written.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from cairn.cli import options, output
from cairn.config import DEFAULT_URL
from cairn.errors import ConfigError

PYPROJECT = """\
[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["cairn-workflows"]

[tool.cairn]
# Modules imported to register workflows (cairn run, cairn worker, cairn check).
modules = ["{module}"]
# The database; --db and CAIRN_DATABASE_URL take precedence.
url = "{url}"
"""

WORKFLOWS = '''\
"""Example workflows: `cairn run {module}:greet Ada`, then `cairn worker`."""

from __future__ import annotations

import cairn


@cairn.step()
async def compose(name: str) -> str:
    """A step: its result is stored before the workflow goes on, so it never runs twice."""
    return f"Hello, {{name}}!"


@cairn.step(retries=cairn.Retry(max_attempts=5, delay="1s"))
def deliver(message: str) -> str:
    """A sync step runs in a thread; a failure is retried with backoff."""
    return f"delivered: {{message}}"


@cairn.workflow(name="greet")
async def greet(name: str = "world") -> str:
    """Compose a greeting, sleep durably, then deliver it."""
    message = await compose(name)
    cairn.set_columns(name=name)
    cairn.progress("sleeping before delivery", current=1, total=2)
    # Durable: the wake time is stored, and the run holds no worker while it sleeps.
    await cairn.sleep("5s")
    return await deliver(message)
'''

README = """\
# {name}

A [cairn](https://pypi.org/project/cairn-workflows/) project: `{module}.py` holds `greet`,
an example workflow of two steps and a durable sleep; `pyproject.toml` tells cairn where
it is. cairn is published as `cairn-workflows` (`pip install cairn-workflows`); the
package you import and the command are both `cairn`.

Run it from this directory: `cairn run {module}:greet Ada` executes the run here until it
goes to sleep, then `cairn worker` wakes it five seconds later and finishes it (Ctrl-C
stops the worker). `cairn runs list` and `cairn runs show RUN_ID` show what happened, and
`cairn check` lists the workflows and steps the modules register.
"""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn init`."""
    parser = commands.add_parser(
        "init",
        parents=[common],
        help="create a starter project",
        description="Create a starter project in DIR (default: the current directory): "
        "pyproject.toml with [tool.cairn] modules and url, a workflows module with an "
        "example workflow, and a README saying how to run it. Existing files are never "
        "overwritten. -m names the module (default: workflows); --db sets the url "
        f"written to pyproject.toml (default: {DEFAULT_URL}).",
    )
    parser.add_argument("directory", metavar="DIR", nargs="?", default=".")
    parser.set_defaults(handler=init)


def project_name(directory: Path) -> str:
    """A package name from the directory's name (`My Shop` -> `my-shop`)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", directory.resolve().name.lower()).strip("-._")
    return name or "cairn-project"


def files(directory: Path, *, module: str, url: str) -> dict[Path, str]:
    """The files `cairn init` writes, by path."""
    facts = {"name": project_name(directory), "module": module, "url": url}
    return {
        directory / "pyproject.toml": PYPROJECT.format(**facts),
        directory / f"{module}.py": WORKFLOWS.format(**facts),
        directory / "README.md": README.format(**facts),
    }


def _explicit(ns: argparse.Namespace) -> tuple[str, str]:
    # Only what was typed: the settings of the project we stand in are not the new one's.
    url = getattr(ns, "db_cmd", None) or getattr(ns, "db", None) or DEFAULT_URL
    modules = [*(getattr(ns, "modules", None) or []), *(getattr(ns, "modules_cmd", None) or [])]
    if len(modules) > 1:
        raise ValueError(f"init creates one module; -m was given {len(modules)} times")
    module = modules[0] if modules else "workflows"
    if not _IDENTIFIER.match(module):
        raise ValueError(
            f"-m {module!r}: init creates a top-level module, so the name must be a Python "
            "identifier (e.g. workflows)"
        )
    if '"' in url or "\\" in url or "\n" in url:
        raise ValueError(f"--db {url!r} cannot be written to pyproject.toml as it is")
    return url, module


def init(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn init`."""
    url, module = _explicit(ns)
    directory = Path(ns.directory)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{str(directory)!r} exists and is not a directory")
    planned = files(directory, module=module, url=url)
    for path in planned:
        if path.exists():
            raise ConfigError(
                f"{str(path)!r} already exists; cairn init never overwrites files "
                "(pick an empty or new directory)"
            )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create directory {str(directory)!r}: {exc.strerror}") from exc
    for path, text in planned.items():
        with path.open("x", encoding="utf-8") as handle:
            handle.write(text)
    steps = [] if directory.resolve() == Path.cwd() else [(f"cd {directory}", "")]
    steps += [
        (f"cairn run {module}:greet Ada", "# runs it here until it sleeps"),
        ("cairn worker", "# wakes it 5s later and finishes it (Ctrl-C stops)"),
    ]
    width = max(len(command) for command, _ in steps)
    lines = [f"  {command:<{width}}   {note}".rstrip() for command, note in steps]
    output.say(f"created {', '.join(str(p) for p in planned)}\nnext:\n" + "\n".join(lines))
    return 0
