"""JsonSerializer and PickleSerializer: values walked into JSON with tagged rich types."""

from __future__ import annotations

import base64
import dataclasses
import enum
import inspect
import json
import math
import pickle
from collections.abc import Iterable, Mapping
from typing import Any

from cairn.errors import KeyUnavailable, SerializationError
from cairn.serialization.classes import type_name, type_path
from cairn.serialization.json_text import (
    DECODER,
    check_unicode,
    decode_json,
    encode_basestring,
    encode_json,
)
from cairn.serialization.tagged import DECODERS, EXACT_ENCODERS, SUBCLASS_ENCODERS, TAG

_HINT = '(use JSON types, dataclasses, pydantic models, or Engine(serializer="pickle"))'
_SCALARS = frozenset({str, int, float, bool, type(None)})
_PICKLE_PROTOCOL = 5
ENCRYPTED = "aesgcm:"
"""How a text cairn.codecs encrypted starts (never JSON): no serializer reads it."""


class _Unsupported(Exception):
    """Internal: a value that cannot be encoded, with the path to it (innermost first)."""

    def __init__(self, value: object, reason: str = "") -> None:
        super().__init__(reason)
        self.value = value
        self.reason = reason
        self.path: list[str] = []


class JsonSerializer:
    """JSON plus tagged rich types; never unpickles.

    Supported beyond JSON: ``datetime`` (naive or aware; a ``zoneinfo`` zone is kept by name),
    ``date``, ``time``, ``timedelta``, ``Decimal``, ``UUID``, ``bytes``, ``bytearray``,
    ``Enum``, ``tuple`` (named tuples keep their type), ``set``, ``frozenset``, dicts with
    non-string keys, dataclasses and pydantic models. Enums, named tuples, dataclasses and
    models are restored to their own type when it can be imported by module and qualified
    name; otherwise an enum comes back as its value, a named tuple as a tuple, and a
    dataclass or model as a plain dict of its fields (also when the stored fields no longer
    fit the class). Subclasses of ``str``, ``int``, ``float``, ``dict`` and ``list`` are
    stored as their base type.
    """

    def __init__(self) -> None:
        self._decoder = json.JSONDecoder(object_hook=self._decode_tagged)

    def dumps(self, value: Any, *, what: str = "value") -> str:
        """Serialize ``value`` to compact JSON.

        Args:
            value: The value to store.
            what: What the value is, for error messages ("result of step 'charge'").

        Returns:
            The JSON text.

        Raises:
            SerializationError: If some part of ``value`` is of an unsupported type; the
                message names ``what``, the module-qualified type and where it sits.
        """
        try:
            kind = type(value)
            if kind is int:  # the encoder's own text for an int, without the encoder's call
                text = int.__repr__(value)
            elif kind is str:
                text = encode_basestring(value)
            elif (
                kind in _SCALARS  # a scalar: no call to walk it
                # A flat list (a step's positional arguments): its items' types looked up
                # in one C call, without _is_plain's frame and a bytecode loop per item.
                or (kind is list and _SCALARS.issuperset(map(type, value)))
                or _is_plain(value)
            ):
                try:
                    text = encode_json(value)
                except ValueError:  # a NaN or infinity: strict JSON has none, so tag them
                    text = encode_json(self._encode(value))
            else:
                text = encode_json(self._encode(value))
        except _Unsupported as exc:
            raise _unsupported_error(exc, what) from exc.__cause__
        except RecursionError:
            raise SerializationError(
                f"cannot serialize {what}: it is nested too deeply or contains a reference cycle",
                what=what,
                type_name=type_name(type(value)),
            ) from None
        except ValueError as exc:  # e.g. an int with more digits than Python will print
            raise SerializationError(
                f"cannot serialize {what}: {_one_line(exc)}",
                what=what,
                type_name=type_name(type(value)),
            ) from exc
        if not text.isascii():
            check_unicode(text, what)
        return text

    def loads(self, text: str) -> Any:
        """Deserialize a text written by :meth:`dumps`.

        Args:
            text: The JSON text.

        Returns:
            The value, with tagged types restored.

        Raises:
            SerializationError: If the text is not valid JSON, holds an unknown or malformed
                tag, or holds a pickled value (only :class:`PickleSerializer` unpickles).
        """
        try:
            # No tag anywhere (the common case): the decoder needs no per-dict hook.
            return decode_json(DECODER if TAG not in text else self._decoder, text)
        except SerializationError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            if text.startswith(ENCRYPTED):  # cairn.codecs' form; read only on this failure
                key_id = text[len(ENCRYPTED) :].partition(":")[0]
                raise KeyUnavailable(
                    f"cannot deserialize stored value: it is encrypted with key {key_id!r}, and "
                    "this process has no keys (set CAIRN_KEYS; see docs/howto/encryption.md)",
                    key_id=key_id,
                ) from None
            raise SerializationError(f"cannot deserialize stored value: {_one_line(exc)}") from exc

    def _encode(self, value: Any) -> Any:
        kind = type(value)
        if kind in _SCALARS:
            if kind is float and not math.isfinite(value):
                return {TAG: "float", "v": repr(value)}
            return value
        if kind is dict:
            return self._encode_dict(value)
        if kind is list:
            return self._encode_items(value)
        encoder = EXACT_ENCODERS.get(kind)
        if encoder is not None:
            return encoder(self, value)
        return self._encode_other(value)

    def _encode_other(self, value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return {TAG: "enum", "type": type_path(type(value)), "v": self._encode(value.value)}
        kind = type(value)
        if dataclasses.is_dataclass(kind):
            fields = {
                f.name: getattr(value, f.name)
                for f in dataclasses.fields(kind)
                if hasattr(value, f.name)
            }
            return {TAG: "dataclass", "type": type_path(kind), "v": self._encode_dict(fields, ".")}
        if hasattr(kind, "model_dump") and hasattr(kind, "model_validate"):
            return self._encode_model(value)
        for base, encoder in SUBCLASS_ENCODERS:
            if isinstance(value, base):
                return encoder(self, value)
        return self._unsupported(value)

    def _encode_dict(self, value: Mapping[Any, Any], sep: str = "") -> dict[str, Any]:
        key: Any = None
        try:
            if TAG not in value and all(type(k) is str for k in value):
                out: dict[str, Any] = {}
                for key, item in value.items():
                    out[key] = self._encode(item)
                return out
            pairs = []
            for key, item in value.items():
                pairs.append([self._encode(key), self._encode(item)])
            return {TAG: "dict", "items": pairs}
        except _Unsupported as exc:
            exc.path.append(f".{key}" if sep else f"[{_short_repr(key)}]")
            raise

    def _encode_items(self, value: Iterable[Any]) -> list[Any]:
        out: list[Any] = []
        try:
            for item in value:
                out.append(self._encode(item))
        except _Unsupported as exc:
            exc.path.append(f"[{len(out)}]")
            raise
        return out

    def _encode_model(self, value: Any) -> dict[str, Any]:
        path = type_path(type(value))
        data = value.model_dump(mode="python", by_alias=True, round_trip=True)
        try:
            return {TAG: "pydantic", "type": path, "v": self._encode_dict(data, ".")}
        except _Unsupported as exc:
            # A field type cairn does not know (a URL, a path): pydantic's own JSON round trip.
            try:
                text = value.model_dump_json(by_alias=True, round_trip=True)
            except Exception:
                raise exc from None
            return {TAG: "pydantic", "type": path, "json": text}

    def _unsupported(self, value: Any) -> Any:
        raise _Unsupported(value)

    def _decode_tagged(self, obj: dict[str, Any]) -> Any:
        tag = obj.get(TAG)
        if tag is None:
            return obj
        decoder = DECODERS.get(tag)
        if decoder is None:
            raise SerializationError(
                f"cannot deserialize stored value: unknown type tag {tag!r}"
                " (was it written by a newer version of cairn?)"
            )
        return decoder(self, obj)

    def _decode_pickle(self, obj: dict[str, Any]) -> Any:
        name = obj.get("type", "")
        raise SerializationError(
            f"cannot deserialize stored value: it holds a pickled {name or 'object'}, and"
            ' unpickling needs Engine(serializer="pickle")',
            type_name=name,
        )


class PickleSerializer(JsonSerializer):
    """Like :class:`JsonSerializer`, but pickles what JSON cannot hold instead of raising.

    Only the unsupported parts of a value are pickled (base64 inside a ``pickle`` tag); the
    rest stays readable JSON. Unpickling runs arbitrary code from the database: use this
    only when everyone who can write to the database is trusted.
    """

    def _unsupported(self, value: Any) -> Any:
        try:
            data = pickle.dumps(value, protocol=_PICKLE_PROTOCOL)
        except Exception as exc:
            raise _Unsupported(value, f"could not be pickled: {_one_line(exc)}") from exc
        return {
            TAG: "pickle",
            "type": type_name(type(value)),
            "v": base64.b64encode(data).decode("ascii"),
        }

    def _decode_pickle(self, obj: dict[str, Any]) -> Any:
        return pickle.loads(base64.b64decode(obj["v"]))  # opted in by the user


def _is_plain(value: Any) -> bool:
    """Whether ``value`` is JSON that needs no tag: exact dict/list/str/int/float/bool/None."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is dict:
        if TAG in value:
            return False
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _SCALARS and not _is_plain(item)):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) not in _SCALARS and not _is_plain(item):
                return False
        return True
    return False


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _unsupported_error(exc: _Unsupported, what: str) -> SerializationError:
    name = type_name(type(exc.value))
    where = f" at {''.join(reversed(exc.path))}" if exc.path else ""
    if inspect.iscoroutine(exc.value):  # the usual cause: `await` left off a step call
        problem = (
            "is a coroutine that was not awaited: an async step or function was called "
            "without `await` (write `await my_step(...)`)"
        )
    else:
        problem = exc.reason or f"is not supported {_HINT}"
    return SerializationError(
        f"cannot serialize {what}: type {name!r}{where} {problem}", what=what, type_name=name
    )
