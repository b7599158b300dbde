"""pydantic-ai agents as cairn workflows: model requests and tool calls as durable steps.

Needs the `pydantic-ai` extra (`pip install 'cairn-workflows[pydantic-ai]'`). See
docs/howto/pydantic-ai.md.
"""

from __future__ import annotations

from cairn.contrib.pydantic_ai.agent import CairnAgent
from cairn.contrib.pydantic_ai.toolset import workflow_tool

__all__ = ["CairnAgent", "workflow_tool"]
