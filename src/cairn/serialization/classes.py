"""Classes in stored values: their names, and finding them again under the import rule."""

from __future__ import annotations

import importlib
import sys
from typing import Any


def type_name(kind: type[Any]) -> str:
    """``module.qualname``: how errors name a type."""
    return f"{kind.__module__}.{kind.__qualname__}"


def type_path(kind: type[Any]) -> str:
    """``module:qualname``: how a tag names the class to restore (see `resolve_type`)."""
    return f"{kind.__module__}:{kind.__qualname__}"


# Top-level packages whose modules a stored type tag may import. A stored value names its
# class's module, and importing a module runs its code: only a module already imported, or
# one of a package that registered workflows or steps or was allowed by the user, is.
_IMPORTABLE: set[str] = set()


def allow_imports(*packages: str) -> None:
    """Let stored values import their classes' modules from these top-level packages.

    A dataclass, enum, named tuple or pydantic model comes back as its own type when its
    module is already imported, or belongs to a package that declared a workflow or step,
    or to one allowed here; otherwise it comes back as plain data.
    """
    for package in packages:
        if package:
            _IMPORTABLE.add(package.partition(".")[0])


def resolve_type(path: str) -> type[Any] | None:
    """The class stored as ``module:qualname``, under the import rule of stored values.

    None when it cannot be found, or its module is neither imported nor may be imported
    (see `allow_imports`).
    """
    module_name, _, qualname = path.partition(":")
    if not qualname or "<locals>" in qualname:
        return None
    try:
        obj: Any = sys.modules.get(module_name)
        if obj is None:
            if module_name.partition(".")[0] not in _IMPORTABLE:
                return None
            obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception:  # an import can fail in any way; the value then comes back plain
        return None
    return obj if isinstance(obj, type) else None
