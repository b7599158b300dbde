"""Fluent chains: `cairn.Workflow(name).then(...).screen(...).branch(...)` and `cairn.Step`.

- steps.py: `cairn.Step`, a named step declared by a call or a class.
- chain.py: `cairn.Workflow`, the chain: a workflow whose code runs its stages.
- building.py: the methods that append stages, shared by a chain and a branch arm
  (`cairn.Workflow.arm()`).
- stages.py: the kinds of stage and what each does with the previous result.
- stage_context.py: the `ctx` of a workflow-kind stage, with the resume guard's data.
"""

from __future__ import annotations

from cairn.authoring.fluent.building import Arm
from cairn.authoring.fluent.chain import Workflow
from cairn.authoring.fluent.stage_context import StageContext, Suspension
from cairn.authoring.fluent.steps import Step

__all__ = ["Arm", "StageContext", "Step", "Suspension", "Workflow"]
