"""Integrations with other libraries, each in a subpackage needing its own extra.

Each one is user code as far as cairn is concerned: it builds on the public `cairn` API
only (steps, workflows, human tasks), never on the engine's internals.
"""

from __future__ import annotations
