"""The codec for everything cairn stores: arguments, step results, event payloads, results.

Plain JSON passes straight through; richer values travel as tagged dicts
``{"__cairn__": "<tag>", ...}``. Only :class:`PickleSerializer`, which users opt into, unpickles.

The package, by concern: `serializers` (JsonSerializer, PickleSerializer: walking a value
into JSON), `tagged` (each rich type's tag, written and read back), `classes` (naming a
stored value's class and importing it again, under `allow_imports`), `json_text` (the
compact, strict JSON text itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from cairn.serialization.classes import allow_imports
from cairn.serialization.classes import resolve_type as resolve_type  # not in __all__: internal
from cairn.serialization.serializers import JsonSerializer, PickleSerializer
from cairn.serialization.tagged import TAG, TEXT_FORMS

__all__ = [
    "TAG",
    "TEXT_FORMS",
    "JsonSerializer",
    "PickleSerializer",
    "Serializer",
    "allow_imports",
    "get",
]


class Serializer(Protocol):
    """Turns values into text for storage and back.

    ``dumps`` either returns the whole text or raises :class:`~cairn.errors.SerializationError`
    naming ``what``; it never returns a partial result. ``loads`` of a text written by the same
    serializer returns an equal value.
    """

    def dumps(self, value: Any, *, what: str) -> str:
        """Serialize ``value``; ``what`` names it in errors ("result of step 'charge'")."""
        ...

    def loads(self, text: str) -> Any:
        """Deserialize a text written by :meth:`dumps`."""
        ...


def get(name: str) -> Serializer:
    """Return the serializer called ``name``: ``"json"`` or ``"pickle"``.

    Args:
        name: The serializer's name.

    Returns:
        A new serializer.

    Raises:
        ValueError: If no serializer has that name.
    """
    if name == "json":
        return JsonSerializer()
    if name == "pickle":
        return PickleSerializer()
    raise ValueError(f'unknown serializer {name!r} (use "json" or "pickle")')


def encoded_list(texts: Sequence[str]) -> str:
    """The text ``dumps`` gives for a list of the values these texts (``dumps``'s) encode.

    Both serializers store a list as a JSON array of its items' encodings, so values
    already stored (messages a mailbox takes at once) become one list without decoding.
    """
    return "[" + ",".join(texts) + "]"
