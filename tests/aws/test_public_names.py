"""cairn.aws's public names, pinned (beside tests/test_public_api.py: they need the extra)."""

from __future__ import annotations

import inspect
import subprocess
import sys

from .conftest import needs_sdk

needs_sdk()

import cairn.aws
from cairn import errors


def test_public_api__aws_all_is_pinned() -> None:
    assert cairn.aws.__all__ == ["Unsupported", "handler"]
    assert all(inspect.getdoc(getattr(cairn.aws, name)) for name in cairn.aws.__all__)
    assert cairn.aws.Unsupported is errors.Unsupported
    assert errors.Unsupported.usage  # a step raising it fails at once, unretried


def test_public_api__importing_cairn_does_not_import_the_sdk() -> None:
    code = "import sys, cairn; print('aws_durable_execution_sdk_python' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
