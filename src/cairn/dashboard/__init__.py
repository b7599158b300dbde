"""cairn's dashboard: a JSON API (and web pages) to inspect and steer runs over HTTP.

Needs the extra: `pip install 'cairn-workflows[dashboard]'`. `cairn dashboard` serves it.
"""

from __future__ import annotations

from cairn.dashboard.asgi import app, create_app

__all__ = ["app", "create_app"]
