"""The `cairn` command line: `cairn run`, `cairn runs`, `cairn worker`, `cairn db`.

Internal: the supported interface is the command itself (docs/reference/cli.md).
"""

from __future__ import annotations
