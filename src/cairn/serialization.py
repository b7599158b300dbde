"""The codec for everything cairn stores: arguments, step results, event payloads, results.

Plain JSON passes straight through; richer values travel as tagged dicts
``{"__cairn__": "<tag>", ...}``. Only :class:`PickleSerializer`, which users opt into, unpickles.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import importlib
import json
import math
import pickle
import sys
import uuid
import zoneinfo
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, NoReturn, Protocol

from cairn.errors import SerializationError

__all__ = [
    "TAG",
    "TEXT_FORMS",
    "JsonSerializer",
    "PickleSerializer",
    "Serializer",
    "allow_imports",
    "get",
]

TAG = "__cairn__"
"""The key that marks a tagged dict; a user dict holding this key is escaped."""

_HINT = '(use JSON types, dataclasses, pydantic models, or Engine(serializer="pickle"))'
_SCALARS = frozenset({str, int, float, bool, type(None)})
# check_circular is off because every value is walked in Python first, and a reference
# cycle ends that walk with RecursionError.
# allow_nan is off so that what is stored is strict JSON any reader takes (a NaN or an
# infinity is stored as a tagged string instead).
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False
)
_DECODER = json.JSONDecoder()
_PICKLE_PROTOCOL = 5


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
            if _is_plain(value):
                try:
                    text = _encode_json(value)
                except ValueError:  # a NaN or infinity: strict JSON has none, so tag them
                    text = _encode_json(self._encode(value))
            else:
                text = _encode_json(self._encode(value))
        except _Unsupported as exc:
            raise _unsupported_error(exc, what) from exc.__cause__
        except RecursionError:
            raise SerializationError(
                f"cannot serialize {what}: it is nested too deeply or contains a reference cycle",
                what=what,
                type_name=_type_name(type(value)),
            ) from None
        except ValueError as exc:  # e.g. an int with more digits than Python will print
            raise SerializationError(
                f"cannot serialize {what}: {_one_line(exc)}",
                what=what,
                type_name=_type_name(type(value)),
            ) from exc
        if not text.isascii():
            _check_unicode(text, what)
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
            return _decode_json(_DECODER if TAG not in text else self._decoder, text)
        except SerializationError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
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
        encoder = _EXACT_ENCODERS.get(kind)
        if encoder is not None:
            return encoder(self, value)
        return self._encode_other(value)

    def _encode_other(self, value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return {TAG: "enum", "type": _type_path(type(value)), "v": self._encode(value.value)}
        kind = type(value)
        if dataclasses.is_dataclass(kind):
            fields = {
                f.name: getattr(value, f.name)
                for f in dataclasses.fields(kind)
                if hasattr(value, f.name)
            }
            return {TAG: "dataclass", "type": _type_path(kind), "v": self._encode_dict(fields, ".")}
        if hasattr(kind, "model_dump") and hasattr(kind, "model_validate"):
            return self._encode_model(value)
        for base, encoder in _SUBCLASS_ENCODERS:
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
        path = _type_path(type(value))
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
        decoder = _DECODERS.get(tag)
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
            "type": _type_name(type(value)),
            "v": base64.b64encode(data).decode("ascii"),
        }

    def _decode_pickle(self, obj: dict[str, Any]) -> Any:
        return pickle.loads(base64.b64decode(obj["v"]))  # opted in by the user


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


def _make_encode_json() -> Callable[[Any], str]:
    """The fastest compact JSON encoder available.

    ``JSONEncoder.encode`` rebuilds the C encoder on every call, which costs about as much as
    encoding a small dict; here it is built once. Should the private ``c_make_encoder`` be
    missing or have changed, the public encoder is used instead.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            iterencode = make(
                None,
                _no_default,
                json.encoder.encode_basestring,
                None,
                ":",
                ",",
                False,
                False,
                False,
            )
            if "".join(iterencode({"a": [1.5, None, "é"]}, 0)) == '{"a":[1.5,null,"é"]}':
                return lambda value: "".join(iterencode(value, 0))
        except Exception:
            pass
    return _ENCODER.encode


def _no_default(value: object) -> NoReturn:
    raise TypeError(f"Object of type {type(value).__qualname__} is not JSON serializable")


_encode_json = _make_encode_json()


def _decode_json(decoder: json.JSONDecoder, text: str) -> Any:
    # raw_decode skips decode()'s two whitespace scans; text cairn wrote has no padding.
    try:
        value, end = decoder.raw_decode(text)
        if end == len(text):
            return value
    except ValueError:
        pass
    return decoder.decode(text)  # padded or malformed: the full decoder says which


def _check_unicode(text: str, what: str) -> None:
    """SerializationError when `text` holds a lone surrogate, which no store can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        raise SerializationError(
            f"cannot serialize {what}: it holds a lone surrogate {bad!r}, which is not valid "
            "Unicode (decode bytes with errors='replace' or keep them as bytes)",
            what=what,
            type_name="builtins.str",
        ) from None


def _type_name(kind: type[Any]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _type_path(kind: type[Any]) -> str:
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
    return _resolve(path)


def _resolve(path: str) -> type[Any] | None:
    """The class stored as ``module:qualname``, or None when it cannot or may not be imported."""
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


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _unsupported_error(exc: _Unsupported, what: str) -> SerializationError:
    name = _type_name(type(exc.value))
    where = f" at {''.join(reversed(exc.path))}" if exc.path else ""
    problem = exc.reason or f"is not supported {_HINT}"
    return SerializationError(
        f"cannot serialize {what}: type {name!r}{where} {problem}", what=what, type_name=name
    )


def _encode_datetime(_: JsonSerializer, value: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value.tzinfo, zoneinfo.ZoneInfo):
        out["tz"] = value.tzinfo.key
    if value.fold:  # which of two repeated wall times, when clocks go back
        out["fold"] = 1
    return out


def _encode_tuple(ser: JsonSerializer, value: tuple[Any, ...]) -> dict[str, Any]:
    if hasattr(type(value), "_fields"):  # a named tuple
        return {TAG: "namedtuple", "type": _type_path(type(value)), "v": ser._encode_items(value)}
    return {TAG: "tuple", "v": ser._encode_items(value)}


def _encode_set(ser: JsonSerializer, value: set[Any] | frozenset[Any]) -> dict[str, Any]:
    try:  # sorted when possible, so that equal sets give equal text
        items: list[Any] = sorted(value)
    except TypeError:
        items = list(value)
    tag = "frozenset" if isinstance(value, frozenset) else "set"
    return {TAG: tag, "v": ser._encode_items(items)}


_Encoder = Callable[[JsonSerializer, Any], Any]

_EXACT_ENCODERS: dict[type[Any], _Encoder] = {
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
_SUBCLASS_ENCODERS: list[tuple[type[Any], _Encoder]] = [
    (str, lambda _, v: str.__str__(v)),
    (int, lambda _, v: int.__int__(v)),
    (float, lambda _, v: float.__float__(v)),
    (dict, JsonSerializer._encode_dict),
    (list, JsonSerializer._encode_items),
    (datetime, lambda ser, v: _encode_datetime(ser, v)),
    *((kind, encoder) for kind, encoder in _EXACT_ENCODERS.items() if kind is not datetime),
]


def _decode_datetime(_: JsonSerializer, obj: dict[str, Any]) -> datetime:
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


def _decode_dict(_: JsonSerializer, obj: dict[str, Any]) -> dict[Any, Any]:
    return {key: value for key, value in obj["items"]}


def _decode_enum(_: JsonSerializer, obj: dict[str, Any]) -> Any:
    kind = _resolve(obj["type"])
    if kind is None or not issubclass(kind, enum.Enum):
        return obj["v"]
    try:
        return kind(obj["v"])
    except ValueError:  # the member is gone
        return obj["v"]


def _decode_namedtuple(_: JsonSerializer, obj: dict[str, Any]) -> tuple[Any, ...]:
    kind = _resolve(obj["type"])
    if kind is not None and issubclass(kind, tuple) and hasattr(kind, "_fields"):
        try:
            return kind(*obj["v"])
        except TypeError:  # the fields changed
            pass
    return tuple(obj["v"])


def _decode_dataclass(_: JsonSerializer, obj: dict[str, Any]) -> Any:
    data: dict[str, Any] = obj["v"]
    kind = _resolve(obj["type"])
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


def _decode_model(_: JsonSerializer, obj: dict[str, Any]) -> Any:
    text = obj.get("json")
    data = obj["v"] if text is None else json.loads(text)
    kind = _resolve(obj["type"])
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

_DECODERS: dict[str, Callable[[JsonSerializer, dict[str, Any]], Any]] = {
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
