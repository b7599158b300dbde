"""Fluent chains: `cairn.Workflow(name).then(...).screen(...).branch(...)` and `cairn.Step`.

- steps.py: `cairn.Step`, a named step declared by a call or a class.
- chain.py: `cairn.Workflow`, the chain and the methods that declare its stages.
- stages.py: the kinds of stage and what each does with the previous result.
- stage_context.py: the `ctx` of a workflow-kind stage, with the resume guard's data.
"""

from __future__ import annotations

from cairn.authoring.fluent.chain import Workflow
from cairn.authoring.fluent.stage_context import StageContext, Suspension
from cairn.authoring.fluent.steps import Step

__all__ = ["StageContext", "Step", "Suspension", "Workflow"]
