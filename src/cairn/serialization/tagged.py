"""The tagged types: each rich type as a ``{"__cairn__": "<tag>", ...}`` dict, and back."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import json
import uuid
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Protocol

from cairn.serialization.classes import resolve_type, type_path

TAG = "__cairn__"
"""The key that marks a tagged dict; a user dict holding this key is escaped."""


class Codec(Protocol):
    """The serializer, as the tables below call it back: for a container's items, a pickle."""

    def _encode_items(self, value: Iterable[Any]) -> list[Any]: ...

    def _encode_dict(self, value: Mapping[Any, Any], sep: str = "") -> dict[str, Any]: ...

    def _decode_pickle(self, obj: dict[str, Any]) -> Any: ...


def _encode_datetime(_: Codec, value: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value.tzinfo, zoneinfo.ZoneInfo):
        out["tz"] = value.tzinfo.key
    if value.fold:  # which of two repeated wall times, when clocks go back
        out["fold"] = 1
    return out


def _encode_tuple(ser: Codec, value: tuple[Any, ...]) -> dict[str, Any]:
    if hasattr(type(value), "_fields"):  # a named tuple
        return {TAG: "namedtuple", "type": type_path(type(value)), "v": ser._encode_items(value)}
    return {TAG: "tuple", "v": ser._encode_items(value)}


def _encode_set(ser: Codec, value: set[Any] | frozenset[Any]) -> dict[str, Any]:
    try:  # sorted when possible, so that equal sets give equal text
        items: list[Any] = sorted(value)
    except TypeError:
        items = list(value)
    tag = "frozenset" if isinstance(value, frozenset) else "set"
    return {TAG: tag, "v": ser._encode_items(items)}


Encoder = Callable[[Codec, Any], Any]

EXACT_ENCODERS: dict[type[Any], Encoder] = {
    datetime: _encode_datetime,
    date: lambda _, v: {TAG: "date", "v": v.isoformat()},
    time: lambda _, v: {TAG: "time", "v": v.isoformat()},
    timedelta: lambda _, v: {TAG: "timedelta", "v": [v.days, v.seconds, v.microseconds]},
    Decimal: lambda _, v: {TAG: "decimal", "v": str(v)},
    uuid.UUID: lambda _, v: {TAG: "uuid", "v": str(v)},
    bytes: lambda _, v: {TAG: "bytes", "v": base64.b64encode(v).decode("ascii")},
    bytearray: lambda _, v: {TAG: "bytearray", "v": base64.b64encode(v).decode("ascii")},
    tuple: _encode_tuple,
    set: _encode_set,
    frozenset: _encode_set,
}

# For subclasses, in order: datetime before date, and anything enum-like is caught earlier.
SUBCLASS_ENCODERS: list[tuple[type[Any], Encoder]] = [
    (str, lambda _, v: str.__str__(v)),
    (int, lambda _, v: int.__int__(v)),
    (float, lambda _, v: float.__float__(v)),
    (dict, lambda ser, v: ser._encode_dict(v)),
    (list, lambda ser, v: ser._encode_items(v)),
    (datetime, lambda ser, v: _encode_datetime(ser, v)),
    *((kind, encoder) for kind, encoder in EXACT_ENCODERS.items() if kind is not datetime),
]


def _decode_datetime(_: Codec, obj: dict[str, Any]) -> datetime:
    # The text holds the wall time and its offset; a named zone then replaces the offset,
    # keeping the wall time, so the value comes back exactly as it was.
    value = datetime.fromisoformat(obj["v"])
    zone = obj.get("tz")
    if zone is not None:
        try:
            value = value.replace(tzinfo=zoneinfo.ZoneInfo(zone))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass  # zone unknown here: keep the fixed UTC offset (the same instant)
    if obj.get("fold"):
        value = value.replace(fold=1)
    return value


def _decode_bytes(obj: dict[str, Any]) -> bytes:
    try:
        return base64.b64decode(obj["v"], validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bad base64 in {obj[TAG]} tag: {exc}") from exc


def _decode_dict(_: Codec, obj: dict[str, Any]) -> dict[Any, Any]:
    return {key: value for key, value in obj["items"]}


def _decode_enum(_: Codec, obj: dict[str, Any]) -> Any:
    kind = resolve_type(obj["type"])
    if kind is None or not issubclass(kind, enum.Enum):
        return obj["v"]
    try:
        return kind(obj["v"])
    except ValueError:  # the member is gone
        return obj["v"]


def _decode_namedtuple(_: Codec, obj: dict[str, Any]) -> tuple[Any, ...]:
    kind = resolve_type(obj["type"])
    if kind is not None and issubclass(kind, tuple) and hasattr(kind, "_fields"):
        try:
            return kind(*obj["v"])
        except TypeError:  # the fields changed
            pass
    return tuple(obj["v"])


def _decode_dataclass(_: Codec, obj: dict[str, Any]) -> Any:
    data: dict[str, Any] = obj["v"]
    kind = resolve_type(obj["type"])
    if kind is None or not dataclasses.is_dataclass(kind):
        return data
    try:
        fields = dataclasses.fields(kind)
        value = kind(**{f.name: data[f.name] for f in fields if f.init and f.name in data})
        for f in fields:
            if not f.init and f.name in data:
                object.__setattr__(value, f.name, data[f.name])
    except Exception:  # the class no longer fits what was stored
        return data
    return value


def _decode_model(_: Codec, obj: dict[str, Any]) -> Any:
    text = obj.get("json")
    data = obj["v"] if text is None else json.loads(text)
    kind = resolve_type(obj["type"])
    if kind is None or not hasattr(kind, "model_validate"):
        return data
    try:
        if text is None:
            return kind.model_validate(data)
        return kind.model_validate_json(text)
    except Exception:  # the model no longer fits what was stored
        return data


TEXT_FORMS: dict[type[Any], Callable[[str], Any]] = {
    datetime: datetime.fromisoformat,
    date: date.fromisoformat,
    time: time.fromisoformat,
    Decimal: Decimal,
    uuid.UUID: uuid.UUID,
}
"""The types stored as their text (ISO 8601, the decimal digits, the UUID), and how that
text is read back; converting a start's arguments reads text the same way."""

DECODERS: dict[str, Callable[[Codec, dict[str, Any]], Any]] = {
    "datetime": _decode_datetime,
    "date": lambda _, o: TEXT_FORMS[date](o["v"]),
    "time": lambda _, o: TEXT_FORMS[time](o["v"]),
    "timedelta": lambda _, o: timedelta(*o["v"]),
    "float": lambda _, o: float(o["v"]),
    "decimal": lambda _, o: TEXT_FORMS[Decimal](o["v"]),
    "uuid": lambda _, o: TEXT_FORMS[uuid.UUID](o["v"]),
    "bytes": lambda _, o: _decode_bytes(o),
    "bytearray": lambda _, o: bytearray(_decode_bytes(o)),
    "tuple": lambda _, o: tuple(o["v"]),
    "namedtuple": _decode_namedtuple,
    "set": lambda _, o: set(o["v"]),
    "frozenset": lambda _, o: frozenset(o["v"]),
    "dict": _decode_dict,
    "enum": _decode_enum,
    "dataclass": _decode_dataclass,
    "pydantic": _decode_model,
    "pickle": lambda ser, o: ser._decode_pickle(o),
}
