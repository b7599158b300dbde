"""What `import cairn` leaves unloaded: a fresh process recovering a run pays every import.

Each of these was measured (callgrind, docs/explanation/performance.md) and is loaded
where it is used: a cairn.yaml read, a cron expression, an isolated step, a blob written,
an unknown name, a `memory://` store.
"""

from __future__ import annotations

import subprocess
import sys

LAZY = ("yaml", "croniter", "dateutil", "multiprocessing", "tempfile", "difflib", "sqlite3")


def _loaded(code: str) -> list[str]:
    probe = f"import sys; {code}; print(' '.join(m for m in {LAZY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_cairn__loads_none_of_the_modules_kept_for_their_use():
    assert _loaded("import cairn") == []


def test_import_cairn__a_postgresql_engine_loads_no_yaml_cron_processes_or_sqlite():
    # psycopg imports tempfile itself, so it is not asked about here.
    code = "import cairn; cairn.Engine('postgresql://u@127.0.0.1:1/x', modules=[])"
    assert [m for m in _loaded(code) if m != "tempfile"] == []


def test_import_cairn__each_is_loaded_by_its_use():
    # Guards the tests above against probing names that are no longer what is used.
    code = (
        "from pathlib import Path; from cairn import config_yaml; "
        "from cairn.authoring import schedule_ticks as t; "
        "config_yaml._settings(Path('cairn.yaml'), 'url: sqlite:///x.db', '/'); "
        "t.cron_after('0 9 * * *', t.ZoneInfo('UTC'), 0.0)"
    )
    assert {"yaml", "croniter", "dateutil"} <= set(_loaded(code))
