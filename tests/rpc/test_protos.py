"""The generated message classes match the .proto files, field for field, and load no protobuf at a task's start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from slurm_resolver.rpc import coordination_pb2, protos
from slurm_resolver.rpc.proto3 import MAP, MESSAGE

from ..conftest import ROOT


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "scripts" / "generate-protos"), str(tmp_path)], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHON": sys.executable}, capture_output=True)
    generated = sorted([*tmp_path.rglob("*_pb2*.py*"), *tmp_path.rglob("protos.py")])
    assert len(generated) == 3
    for path in generated:
        committed = ROOT / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run scripts/generate-protos"


NAMES = list(coordination_pb2.DESCRIPTOR.message_types_by_name)
"""Every message of the proto, by protoc's descriptor: nothing lists them by hand."""


def test_every_message_has_its_class_with_the_proto_s_fields() -> None:
    assert len(NAMES) >= 18
    for name in NAMES:
        descriptor, ours = coordination_pb2.DESCRIPTOR.message_types_by_name[name], getattr(protos, name)
        assert [(f.number, f.name) for f in ours.FIELDS] == sorted((f.number, f.name) for f in descriptor.fields)
        for field in ours.FIELDS:
            theirs = descriptor.fields_by_number[field.number]
            if field.kind == MESSAGE:
                assert field.message is not None and field.message.__name__ == theirs.message_type.name
            assert (field.kind == MAP) == bool(theirs.message_type and theirs.message_type.GetOptions().map_entry)


ROUND_TRIP = """
import sys
from slurm_resolver.rpc import wire
from slurm_resolver.rpc.rounds import codec
from slurm_resolver.rpc.messages import Failure, Records, Round
records = Records([1, 2], [8000, 8001], [9000, 9001], {2: "0,1"})
sent = codec.encode_call(codec.Call("7.0", Round.barrier("b", 0), 1, 0, b"n" * 16, 8000, Failure()), records,
                         lambda header: b"seal")
header, seal = wire.unwrap(sent[0])
print(codec.read_records(codec.decode_call(header, 4), sent[1:], 4) == records, seal.decode(), end=" ")
print(sorted(name for name in sys.modules if name.startswith("google")))
"""


def test_a_fresh_process_reads_and_writes_them_without_protobuf() -> None:
    """protobuf on upb cost a task's start about a quarter of this package's import: none of it is loaded."""
    done = subprocess.run([sys.executable, "-c", ROUND_TRIP], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "True seal []\n"
