"""Protocol buffers' wire format (proto3) for the messages of this package's ``.proto`` files, without protobuf.

protobuf on upb costs every task's start about a quarter of this package's import (its C module, its
descriptor pool, and the well-known types with ``datetime`` and ``calendar`` that its first message class
imports: benchmarks/README.md). The messages here are few and flat; their classes are generated from the
``.proto`` (`scripts/generate-protos` writes `slurm_resolver.rpc.protos`), and this module reads and writes
them, byte for byte as protobuf does for every field, fields in number order (a peer that writes them in
another order, or a scalar field twice, is read as protobuf reads it: the last wins). Protobuf itself stays
the reference: ``tests/rpc/test_proto3.py`` holds the two equal on every message, and hostile bytes alike.

What a message from the network may hold is bounded here, whatever the codecs check after: at most `MOST_FIELDS`
fields (nested ones counted) and `MOST_REPEATED` values in a repeated field, no field the ``.proto`` does not
declare (the tasks of one launch run one version), no group; a malformed message is a `ProtoError`, never a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)

MOST_FIELDS = 1 << 16
"""Fields a message read may hold, nested ones counted (the largest this package sends, a Stacks answer of 256
classes of 32 frames, holds about 30,000)."""
MOST_REPEATED = 4096
"""Values a repeated or map field may hold (the most any message of this package sends: a chunk's records; a
call's or an answer's chunks, one for every 256 tasks or fewer, reach it at a job of a million tasks)."""

VARINT, LEN = 0, 2
"""The wire types of the field kinds below (no other is read: fixed-width numbers and groups are refused)."""

UINT32, UINT64, INT64, SINT32, BOOL, STRING, BYTES, MESSAGE, MAP = range(9)
"""The kinds of field the ``.proto`` files use."""

_WIRE = {UINT32: VARINT, UINT64: VARINT, INT64: VARINT, SINT32: VARINT, BOOL: VARINT, STRING: LEN, BYTES: LEN,
         MESSAGE: LEN, MAP: LEN}
_NUMBERS = frozenset((UINT32, UINT64, INT64, SINT32, BOOL))
_CONTINUED = bytes(range(0x80, 0x100))
_EMPTY: Mapping[Any, Any] = MappingProxyType({})
_WRITTEN = " bytes"
"""Where a message keeps its bytes once written, beside its fields' values (no field's name has a space)."""
_BITS64 = (1 << 64) - 1


class ProtoError(ValueError):
    """Bytes that are no message of its type, or beyond this format's bounds."""


class Field:
    """One field of a message: its number, name and kind; ``repeated``; ``present`` (``optional``: whether it is
    set is told); ``message``, a message field's class; ``key`` and ``value``, a map's kinds."""

    __slots__ = ("number", "name", "kind", "repeated", "present", "message", "key", "value", "tag", "packed")

    def __init__(self, number: int, name: str, kind: int, repeated: bool = False, present: bool = False,
                 message: type[Message] | None = None, key: int = UINT32, value: int = STRING) -> None:
        self.number, self.name, self.kind, self.repeated, self.present = number, name, kind, repeated, present
        self.message, self.key, self.value = message, key, value
        self.packed = repeated and kind in _NUMBERS
        self.tag = varint(number << 3 | (LEN if self.packed else _WIRE[kind]))


class Message:
    """A message of a ``.proto``: its fields are attributes (each class's defaults where unset: 0, ``""``,
    ``b""``, ``False``, an empty tuple or mapping, an empty message), set by keyword as protobuf's are.
    Read-only once made (a field assigned raises `AttributeError`; a list or mapping given for a repeated field or
    a map is kept as given, and is not to be changed after), so its bytes are written once: a message sized
    (`ByteSize`) and then sent, or sent inside another, is not written again."""

    FIELDS: ClassVar[tuple[Field, ...]] = ()
    _BY_NUMBER: ClassVar[dict[int, Field]] = {}
    _NAMES: ClassVar[frozenset[str]] = frozenset()
    _PRESENT: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, **fields: Any) -> None:
        names, values = self._NAMES, self.__dict__
        for name, value in fields.items():
            if name not in names:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            if value is not None:
                values[name] = value

    @classmethod
    def FromString(cls, data: bytes) -> Any:  # noqa: N802 (protobuf's name)
        """The message ``data`` holds (`ProtoError` where it holds none)."""
        message = cls()
        message.ParseFromString(data)
        return message

    def ParseFromString(self, data: bytes) -> None:  # noqa: N802 (protobuf's name)
        """Read ``data`` into this message, cleared first."""
        self.__dict__.clear()  # (its bytes, if written, with its fields)
        try:
            _read(self, data, 0, len(data), [MOST_FIELDS])
        except IndexError:
            raise ProtoError("a message cut short") from None
        except UnicodeDecodeError:
            raise ProtoError("a string that is not UTF-8") from None

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        """This message's bytes (written at the first call)."""
        values = self.__dict__
        written = values.get(_WRITTEN)
        if written is None:
            out = bytearray()
            _write(self, out)
            written = values[_WRITTEN] = bytes(out)
        return written

    def ByteSize(self) -> int:  # noqa: N802 (protobuf's name)
        """The length of this message's bytes."""
        return len(self.SerializeToString())

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's name)
        """Whether a message field, or an ``optional`` one, is set (`ValueError` for any other name, as protobuf)."""
        if name not in self._PRESENT:
            raise ValueError(f"{type(self).__name__} has no field {name!r} whose presence is told")
        return name in self.__dict__

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: make one with its fields by keyword")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_plain(getattr(self, f.name)) == _plain(getattr(other, f.name)) for f in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items() if name != _WRITTEN)
        return f"{type(self).__name__}({shown})"


def _plain(value: Any) -> Any:
    """A field's value as compared: a repeated field's as a list, a map's as a dict."""
    if isinstance(value, (str, bytes, int, Message)):
        return value
    return dict(value) if isinstance(value, Mapping) else list(value)


def declare(cls: type[Message], *fields: Field) -> None:
    """Give ``cls`` its ``fields`` (a generated module's, once every class exists) and their defaults."""
    cls.FIELDS = tuple(sorted(fields, key=lambda f: f.number))
    cls._BY_NUMBER = {f.number: f for f in fields}
    cls._NAMES = frozenset(f.name for f in fields)
    cls._PRESENT = frozenset(f.name for f in fields if f.present or f.kind == MESSAGE and not f.repeated)
    for f in fields:
        default: Any
        if f.kind == MAP:
            default = _EMPTY
        elif f.repeated:
            default = ()
        elif f.kind == MESSAGE:
            assert f.message is not None
            default = f.message()
        else:
            default = {STRING: "", BYTES: b"", BOOL: False}.get(f.kind, 0)
        setattr(cls, f.name, default)


# Writing.

def varint(n: int) -> bytes:
    """``n`` (not negative) as a varint's bytes."""
    out = bytearray()
    _put(out, n)
    return bytes(out)


def _put(out: bytearray, n: int) -> None:
    """``n`` (not negative) as a varint."""
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _number(kind: int, value: Any) -> int:
    """A number as its varint holds it."""
    if kind == UINT32:
        if not 0 <= value <= 0xFFFFFFFF:
            raise ValueError(f"{value} is no uint32")
        return int(value)
    if kind == BOOL:
        return 1 if value else 0
    if kind == INT64:
        if not -(1 << 63) <= value < 1 << 63:
            raise ValueError(f"{value} is no int64")
        return int(value) & _BITS64
    if kind == SINT32:
        if not -0x80000000 <= value <= 0x7FFFFFFF:
            raise ValueError(f"{value} is no sint32")
        return ((int(value) << 1) ^ (int(value) >> 31)) & 0xFFFFFFFF
    if not 0 <= value <= _BITS64:
        raise ValueError(f"{value} is no uint64")
    return int(value)


def _write(message: Message, out: bytearray) -> None:
    values = message.__dict__
    for f in message.FIELDS:
        value = values.get(f.name)
        if value is None:
            continue
        kind = f.kind
        if f.repeated:
            if f.packed:
                if len(value):
                    body = bytearray()
                    for item in value:
                        _put(body, _number(kind, item))
                    out += f.tag
                    _put(out, len(body))
                    out += body
            else:
                for item in value:
                    _item(out, f.tag, kind, item)
        elif kind == MAP:
            for key, item in value.items():
                entry = bytearray()  # its key and value written even where they hold their defaults, as protobuf does
                _entry_field(entry, _KEY_TAGS[f.key], f.key, key)
                _entry_field(entry, _VALUE_TAGS[f.value], f.value, item)
                out += f.tag
                _put(out, len(entry))
                out += entry
        elif kind == MESSAGE:
            _item(out, f.tag, kind, value)
        elif value or f.present:  # a default left out (proto3's rule), unless whether it is set is told
            _entry_field(out, f.tag, kind, value)


def _entry_field(out: bytearray, tag: bytes, kind: int, value: Any) -> None:
    """A singular field, or a map entry's key or value (written whatever it holds)."""
    if kind == STRING or kind == BYTES:
        _item(out, tag, kind, value)
    else:
        out += tag
        _put(out, _number(kind, value))


def _item(out: bytearray, tag: bytes, kind: int, value: Any) -> None:
    """One length-delimited value: a string, bytes or a message."""
    data: bytes | bytearray
    if kind == STRING:
        data = value.encode()
    elif kind == MESSAGE:
        data = value.__dict__.get(_WRITTEN)
        if data is None:
            data = bytearray()
            _write(value, data)
    else:
        data = value
    out += tag
    _put(out, len(data))
    out += data


_KEY_TAGS = {kind: varint(1 << 3 | _WIRE[kind]) for kind in (UINT32, UINT64, INT64, SINT32, BOOL, STRING)}
_VALUE_TAGS = {kind: varint(2 << 3 | _WIRE[kind]) for kind in (UINT32, UINT64, INT64, SINT32, BOOL, STRING, BYTES)}


# Reading.

def _get(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at``, and where the next thing starts."""
    byte = data[at]
    if byte < 0x80:
        return byte, at + 1
    value, shift, at = byte & 0x7F, 7, at + 1
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _BITS64, at  # (bits beyond 64 dropped, as protobuf does)
        shift += 7
        if shift >= 70:
            raise ProtoError("a varint longer than ten bytes")


def _short(data: bytes, at: int) -> tuple[int, int]:
    """A tag or a length: a varint of at most five bytes and 32 bits (protobuf refuses longer ones)."""
    value, after = _get(data, at)
    if after - at > 5 or value > 0xFFFFFFFF:
        raise ProtoError("a tag or a length longer than five bytes")
    return value, after


def _value(kind: int, raw: int) -> Any:
    """A number (a varint of at most 64 bits) read as its kind reads it."""
    if kind == UINT32:
        return raw & 0xFFFFFFFF
    if kind == BOOL:
        return raw != 0
    if kind == INT64:
        return raw - (1 << 64) if raw >> 63 else raw
    if kind == SINT32:
        raw &= 0xFFFFFFFF
        return (raw >> 1) ^ -(raw & 1)
    return raw  # UINT64 (`_get` keeps 64 bits)


def _span(data: bytes, at: int, end: int) -> tuple[int, int]:
    """Where a length-delimited value whose length starts at ``at`` begins and ends, within ``end``."""
    length = data[at]
    if length < 0x80:
        at += 1
    else:
        length, at = _short(data, at)
    stop = at + length
    if stop > end:
        raise ProtoError("a field longer than its message")
    return at, stop


_new = object.__new__


def _read(message: Message, data: bytes, at: int, end: int, budget: list[int]) -> None:
    """Read ``data[at:end]`` into ``message``: each field spends one of ``budget[0]``."""
    by_number, values = message._BY_NUMBER, message.__dict__
    while at < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise ProtoError(f"a message of more than {MOST_FIELDS} fields")
        key = data[at]
        if key < 0x80:  # a field of number 15 or less: one byte
            at += 1
        else:
            key, at = _short(data, at)
        f = by_number.get(key >> 3)
        wire = key & 7
        if f is None:
            raise ProtoError(f"a field this protocol does not have (number {key >> 3})")
        kind = f.kind
        if wire == LEN:
            at, stop = _span(data, at, end)
            if f.packed:
                found = values.get(f.name)
                if found is None:
                    found = values[f.name] = []
                if len(found) + len(data[at:stop].translate(None, _CONTINUED)) > MOST_REPEATED:
                    raise ProtoError(f"more than {MOST_REPEATED} values in {f.name}")
                _unpack(data, at, stop, kind, found)
                at = stop
                continue
            if kind == STRING:
                value: Any = data[at:stop].decode()
            elif kind == BYTES:
                value = data[at:stop]
            elif kind == MESSAGE:
                assert f.message is not None
                value = None if f.repeated else values.get(f.name)
                if value is None:
                    value = _new(f.message)  # (a message made empty: its __init__ takes no field here)
                _read(value, data, at, stop, budget)
            elif kind == MAP:
                found = values.get(f.name)
                if found is None:
                    found = values[f.name] = {}
                if len(found) >= MOST_REPEATED:
                    raise ProtoError(f"more than {MOST_REPEATED} entries in {f.name}")
                key_value, item = _entry(f, data, at, stop, budget)
                found[key_value] = item
                at = stop
                continue
            else:
                raise ProtoError(f"{f.name} with the wrong wire type")
            at = stop
        elif wire == VARINT and kind in _NUMBERS:
            raw = data[at]
            if raw < 0x80 and kind != SINT32:
                at += 1
                value = raw if kind != BOOL else raw != 0
            else:
                raw, at = _get(data, at)
                value = _value(kind, raw)
        else:
            raise ProtoError(f"{f.name} with the wrong wire type")
        if f.repeated:
            found = values.get(f.name)
            if found is None:
                found = values[f.name] = []
            if len(found) >= MOST_REPEATED:
                raise ProtoError(f"more than {MOST_REPEATED} values in {f.name}")
            found.append(value)
        else:
            values[f.name] = value
    if at != end:
        raise ProtoError("a message cut short")


def _unpack(data: bytes, at: int, stop: int, kind: int, found: list[Any]) -> None:
    """The varints of a packed field, ``data[at:stop]``, appended to ``found`` (a uint32 of up to three bytes, as a
    rank or a node's position is, read without a call)."""
    append = found.append
    if kind == UINT32:
        while at < stop:
            byte = data[at]
            if byte < 0x80:
                append(byte)
                at += 1
                continue
            second = data[at + 1] if at + 1 < stop else 0x80
            if second < 0x80:
                append(byte & 0x7F | second << 7)
                at += 2
                continue
            third = data[at + 2] if at + 2 < stop else 0x80
            if third < 0x80:
                append(byte & 0x7F | (second & 0x7F) << 7 | third << 14)
                at += 3
                continue
            raw, at = _get(data, at)
            append(raw & 0xFFFFFFFF)
    else:
        while at < stop:
            raw, at = _get(data, at)
            append(_value(kind, raw))
    if at != stop:
        raise ProtoError("a packed field cut short")


def _entry(f: Field, data: bytes, at: int, end: int, budget: list[int]) -> tuple[Any, Any]:
    """A map's entry: its key and value (each its kind's default where left out)."""
    key: Any = "" if f.key == STRING else 0
    value: Any = {STRING: "", BYTES: b""}.get(f.value, 0)
    while at < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise ProtoError(f"a message of more than {MOST_FIELDS} fields")
        tag, at = _short(data, at)
        number, wire = tag >> 3, tag & 7
        kind = f.key if number == 1 else f.value if number == 2 else None
        if kind is None or wire != _WIRE[kind]:
            raise ProtoError(f"a malformed entry of {f.name}")
        if wire == LEN:
            at, stop = _span(data, at, end)
            read: Any = data[at:stop].decode() if kind == STRING else data[at:stop]
            at = stop
        else:
            raw, at = _get(data, at)
            read = _value(kind, raw)
        if number == 1:
            key = read
        else:
            value = read
    if at != end:
        raise ProtoError("a map entry cut short")
    return key, value
