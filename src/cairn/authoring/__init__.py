"""What user code touches: decorators, policies and in-run primitives."""

from __future__ import annotations
