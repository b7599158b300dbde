"""examples/aws_lambda.py runs as written, and the Lambda how-to shows it whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import needs_sdk

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "aws_lambda.py"


def test_example__the_how_to_shows_it_whole():
    page = (ROOT / "docs" / "howto" / "aws.md").read_text(encoding="utf-8")
    assert f"```python\n{EXAMPLE.read_text(encoding='utf-8')}```" in page


@pytest.mark.process
def test_example__runs_on_the_local_runner_as_the_page_says(tmp_path):
    needs_sdk()
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = 'SUCCEEDED {"receipt": "receipt-o-1-1250", "approval": {"by": "ana"}}'
    assert done.stdout.strip() == printed
    assert printed in (ROOT / "docs" / "howto" / "aws.md").read_text(encoding="utf-8")
