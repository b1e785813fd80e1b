"""proto3.py reads and writes every message as protobuf does (protobuf, protoc's `coordination_pb2`, is the
reference), and refuses what is malformed or beyond its bounds with a `ProtoError`, never a crash."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_resolver.rpc import coordination_pb2, protos
from slurm_resolver.rpc.proto3 import (
    BOOL,
    BYTES,
    INT64,
    MAP,
    MESSAGE,
    MOST_FIELDS,
    MOST_REPEATED,
    SINT32,
    STRING,
    UINT32,
    UINT64,
    Message,
    ProtoError,
    varint,
)

NAMES = list(coordination_pb2.DESCRIPTOR.message_types_by_name)

_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    UINT32: st.integers(0, 2**32 - 1), UINT64: st.integers(0, 2**64 - 1), INT64: st.integers(-(2**63), 2**63 - 1),
    SINT32: st.integers(-(2**31), 2**31 - 1), BOOL: st.booleans(), STRING: st.text(max_size=12),
    BYTES: st.binary(max_size=12),
}


def _values(cls: type[Message], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Some fields of a ``cls`` message, as plain values (a nested message as a dict of its own)."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls.FIELDS:
        if f.kind == MAP:
            fields[f.name] = st.dictionaries(_SCALARS[f.key], _SCALARS[f.value], max_size=3)
        elif f.kind == MESSAGE:
            assert f.message is not None
            if depth > 2:
                continue
            one = _values(f.message, depth + 1)
            fields[f.name] = st.lists(one, max_size=2) if f.repeated else one
        else:
            fields[f.name] = st.lists(_SCALARS[f.kind], max_size=5) if f.repeated else _SCALARS[f.kind]
    return st.fixed_dictionaries({}, optional=fields)


def _built(module: Any, name: str, values: dict[str, Any]) -> Any:
    """A ``name`` message of ``module`` (ours, or protobuf's) holding ``values``."""
    cls = getattr(module, name)
    ours = getattr(protos, name)
    made = {}
    for f in ours.FIELDS:
        if f.name not in values:
            continue
        value = values[f.name]
        if f.kind == MESSAGE:
            assert f.message is not None
            child = f.message.__name__
            value = [_built(module, child, v) for v in value] if f.repeated else _built(module, child, value)
        made[f.name] = value
    return cls(**made)


def _plain(message: Any) -> dict[str, Any]:
    """Every field of a message of either module, as plain values."""
    ours = getattr(protos, type(message).__name__)
    found: dict[str, Any] = {}
    for f in ours.FIELDS:
        value = getattr(message, f.name)
        if f.kind == MESSAGE:
            value = [_plain(v) for v in value] if f.repeated else _plain(value)
        elif f.kind == MAP:
            value = dict(value)
        elif f.repeated:
            value = list(value)
        found[f.name] = value
        if f.present:
            found[f"{f.name}?"] = message.HasField(f.name)
    return found


def _several(values: Any) -> bool:
    """Whether ``values`` hold a map of more than one entry."""
    if isinstance(values, dict):
        return any(isinstance(v, dict) and (len(v) > 1 or _several(v)) or _several(v) for v in values.values())
    return isinstance(values, list) and any(map(_several, values))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_message_is_written_and_read_as_protobuf_does(name: str, data: st.DataObject) -> None:
    values = data.draw(_values(getattr(protos, name)))
    ours, theirs = _built(protos, name, values), _built(coordination_pb2, name, values)
    written = ours.SerializeToString()
    assert _plain(type(theirs).FromString(written)) == _plain(theirs)  # protobuf reads ours as it wrote it
    if not _several(values):  # (a map's entries may come in another order)
        assert written == theirs.SerializeToString()
    read = type(ours).FromString(theirs.SerializeToString())
    assert _plain(read) == _plain(theirs) and read == ours


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=80, deadline=None)
@given(data=st.binary(max_size=64))
def test_what_it_reads_from_any_bytes_protobuf_reads_alike(name: str, data: bytes) -> None:
    """Any bytes: a `ProtoError`, or the message protobuf reads from them (stricter: no field the proto lacks)."""
    try:
        ours = getattr(protos, name).FromString(data)
    except ProtoError:
        return
    theirs = getattr(coordination_pb2, name).FromString(data)
    assert _plain(ours) == _plain(theirs)


@settings(max_examples=150, deadline=None)
@given(values=_values(protos.Call), cut=st.integers(0, 200), flip=st.integers(0, 255))
def test_a_real_message_damaged_is_read_alike_or_refused(values: dict[str, Any], cut: int, flip: int) -> None:
    data = bytearray(_built(protos, "Call", values).SerializeToString())
    if data:
        data[cut % len(data)] ^= flip
    data = data[: len(data) - cut % 3]
    try:
        ours = protos.Call.FromString(bytes(data))
    except ProtoError:
        return
    assert _plain(ours) == _plain(coordination_pb2.Call.FromString(bytes(data)))


MALFORMED = [  # bytes read as a Who (1 job_key, 2 source, 3 nonce, 4 port, 5 early), why, whether protobuf refuses
    (b"\x10", "cut short", True),  # a varint's byte missing
    (b"\x10\x80", "cut short", True),  # a varint that never ends
    (b"\x10" + b"\xff" * 10 + b"\x01", "ten bytes", True),
    (b"\x0a\x05ab", "longer than its message", True),  # job_key: 5 bytes said, 2 there
    (b"\x0a\x02\xff\xfe", "UTF-8", True),
    (b"\x90\x80\x80\x80\x80\x00\x05", "five bytes", True),  # source's tag in six bytes
    (b"\x0a\x82\x80\x80\x80\x80\x00ab", "five bytes", True),  # job_key's length in six bytes
    (b"\x78\x01", "does not have", False),  # field 15: protobuf keeps it as unknown
    (b"\x7b\x7c", "does not have", False),  # a group (wire types 3 and 4) in field 15
    (b"\x12\x01x", "wrong wire type", False),  # source (a varint) with a length: protobuf keeps it as unknown
    (b"\x18\x01", "wrong wire type", False),  # nonce (bytes) as a varint
]


@pytest.mark.parametrize(("data", "said", "refused"), MALFORMED)
def test_malformed_bytes_are_refused_and_say_why(data: bytes, said: str, refused: bool) -> None:
    with pytest.raises(ProtoError, match=said):
        protos.Who.FromString(data)
    if refused:
        with pytest.raises(DecodeError):
            coordination_pb2.Who.FromString(data)


def _packed(field: int, count: int) -> bytes:
    body = b"\x01" * count
    return bytes([field << 3 | 2]) + varint(len(body)) + body


def test_a_repeated_field_holds_at_most_its_bound_however_it_comes() -> None:
    assert len(protos.Records.FromString(_packed(1, MOST_REPEATED)).ranks) == MOST_REPEATED
    beyond: list[tuple[type[Message], bytes]] = [
        (protos.Records, _packed(1, MOST_REPEATED + 1)),
        (protos.Records, _packed(1, MOST_REPEATED) + b"\x08\x01"),  # then one more, unpacked
        (protos.Records, _packed(1, 3000) + _packed(1, 3000)),
        (protos.Bundle, b"\x0a\x00" * (MOST_REPEATED + 1)),
    ]
    for cls, data in beyond:
        with pytest.raises(ProtoError, match="more than"):
            cls.FromString(data)
    entries = b"".join(b"\x22" + varint(len(e)) + e for e in (b"\x08" + varint(r) + b"\x12\x00"
                                                              for r in range(MOST_REPEATED + 1)))  # gpus {r: ""}
    with pytest.raises(ProtoError, match="more than"):
        protos.Records.FromString(entries)


def test_a_message_holds_at_most_its_bound_of_fields() -> None:
    protos.Who.FromString(b"\x10\x01" * (MOST_FIELDS // 2))  # a field again and again: the last wins
    with pytest.raises(ProtoError, match="more than"):
        protos.Who.FromString(b"\x10\x01" * (MOST_FIELDS + 1))


def test_a_number_s_bits_beyond_64_are_dropped_as_protobuf_drops_them() -> None:
    data = b"\x28" + b"\x80" * 9 + b"\x02"  # early (a bool): a ten-byte varint whose only bit set is the 65th
    assert protos.Who.FromString(data).early is coordination_pb2.Who.FromString(data).early is False


@pytest.mark.parametrize(("message", "said"), [
    (protos.Beat(started=2**64), "no uint64"), (protos.Beat(started=-1), "no uint64"),
    (protos.Progress(lowest=2**63), "no int64"), (protos.Beat(status=2**31), "no sint32"),
    (protos.Who(source=2**32), "no uint32"),
])
def test_a_number_its_field_cannot_hold_is_not_written(message: Message, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        message.SerializeToString()


def test_a_message_is_made_by_name_and_tells_what_is_set() -> None:
    with pytest.raises(TypeError, match="no field 'colour'"):
        protos.Who(colour=1)
    over = protos.HandOver(successor=3, above=0)
    assert over.HasField("above") and not protos.HandOver(successor=3).HasField("above")
    assert protos.HandOver.FromString(over.SerializeToString()).HasField("above")
    assert protos.Beat().progress.tasks == 0 and not protos.Beat().HasField("progress")
    assert protos.Beat(progress=protos.Progress()).HasField("progress")
    with pytest.raises(ValueError, match="no uint32"):
        protos.Who(source=-1).SerializeToString()
    assert repr(protos.Round(kind="table")) == "Round(kind='table')"
    with pytest.raises(ValueError, match="presence"):
        protos.Who().HasField("source")  # a plain scalar's presence is not told, as in protobuf


def test_a_message_is_read_only_and_its_defaults_shared_by_none() -> None:
    beat = protos.Beat(source=1)
    with pytest.raises(AttributeError, match="read-only"):
        beat.progress.tasks = 3
    with pytest.raises(AttributeError, match="read-only"):
        beat.source = 2
    assert protos.Beat().progress.tasks == 0 and beat.SerializeToString() == b"\x10\x01"


def test_a_message_is_written_once_and_read_afresh() -> None:
    """A message sized and then sent, or sent inside another (an answer of stacks sizes each class, then sends
    them), is written once: it is read-only, so its bytes cannot change; reading into it forgets them."""
    import slurm_resolver.rpc.proto3 as proto3

    written: list[str] = []
    original = proto3._write

    def counted(message: Message, out: bytearray) -> None:
        written.append(type(message).__name__)
        original(message, out)

    frame = protos.StackFrame(file="a.py", line=3, function="f")
    one = protos.StackClass(frames=[frame], main=True)
    proto3._write = counted
    try:
        size = one.ByteSize()
        answer = protos.StacksAnswer(source=1, classes=[one]).SerializeToString()
        assert one.SerializeToString() in answer and size == len(one.SerializeToString())
    finally:
        proto3._write = original
    assert written == ["StackClass", "StackFrame", "StacksAnswer"], written
    assert repr(one).startswith("StackClass(frames=") and "bytes" not in repr(one)
    read = protos.StacksAnswer.FromString(answer)
    assert read.SerializeToString() == answer
    read.ParseFromString(protos.StacksAnswer(source=2).SerializeToString())
    assert read.source == 2 and not read.classes and read.SerializeToString() == b"\x10\x02"
