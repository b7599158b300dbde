"""`python -m bench.celery_transport` reads its command line with argparse (--help, RUNS)."""

from __future__ import annotations

import pytest
from bench import celery_transport


def test_celery_transport__help_prints_a_usage_line_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        celery_transport.main(["--help"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m bench.celery_transport [-h] [runs]")


def test_celery_transport__runs_is_an_optional_positive_count() -> None:
    assert celery_transport.arguments([]).runs == 500
    assert celery_transport.arguments(["300"]).runs == 300


@pytest.mark.parametrize("bad", ["0", "-5", "many"])
def test_celery_transport__a_runs_that_is_no_positive_count_is_a_usage_error(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        celery_transport.arguments([bad])

    assert exited.value.code == 2
    assert "usage: python -m bench.celery_transport" in capsys.readouterr().err
