"""`make bench`: cairn's speed beside the raw commit of its database, measured in one run."""

from __future__ import annotations
