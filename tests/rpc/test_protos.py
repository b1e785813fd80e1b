"""The generated protocol buffer code matches the .proto files, and `rpc.protos` gives its classes cheaply."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_resolver.rpc import coordination_pb2, protos

from ..conftest import ROOT


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "scripts" / "generate-protos"), str(tmp_path)], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHON": sys.executable}, capture_output=True)
    generated = sorted([*tmp_path.rglob("*_pb2*.py*"), *tmp_path.rglob("coordination_descriptor.py")])
    assert len(generated) == 3
    for path in generated:
        committed = ROOT / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run scripts/generate-protos"


NAMES = list(coordination_pb2.DESCRIPTOR.message_types_by_name)
"""Every message of the proto, by its descriptor: nothing lists them by hand."""


def test_the_classes_are_the_generated_modules() -> None:
    assert len(NAMES) >= 18
    for name in NAMES:
        assert getattr(protos, name) is getattr(coordination_pb2, name)
    assert protos.Records.GpusEntry is coordination_pb2.Records.GpusEntry


def _fresh(code: str, **environ: str) -> str:
    """What ``code`` prints in a fresh interpreter (``environ`` added to this one's)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **environ})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


ROUND_TRIP = """
import sys
from slurm_resolver.rpc import protos, wire
from slurm_resolver.rpc.rounds import codec
from slurm_resolver.rpc.messages import Failure, Records, Round
records = Records([1, 2], [8000, 8001], [9000, 9001], {2: "0,1"})
sent = codec.encode_call(codec.Call("7.0", Round.barrier("b", 0), 1, 0, b"n" * 16, 8000, Failure()), records,
                         lambda header: b"seal")
header, seal = wire.unwrap(sent[0])
print(codec.read_records(codec.decode_call(header, 4), sent[1:], 4) == records, seal.decode(), end=" ")
print("google.protobuf.text_format" in sys.modules, end=" ")
from slurm_resolver.rpc import coordination_pb2
print(all(getattr(protos, name) is getattr(coordination_pb2, name)
          for name in coordination_pb2.DESCRIPTOR.message_types_by_name))
"""


def test_a_fresh_process_builds_them_without_protobufs_python_layer() -> None:
    """Where protobuf runs on upb (its default): no text_format, python_message, pickle... in a task's start;
    and the generated module, imported after, gives the same classes."""
    from google.protobuf.internal import api_implementation

    if api_implementation.Type() != "upb":
        pytest.skip(f"protobuf runs on {api_implementation.Type()}, not upb")
    assert _fresh(ROUND_TRIP) == "True seal False True\n"


def test_on_protobufs_python_implementation_they_come_from_the_generated_module() -> None:
    assert _fresh(ROUND_TRIP, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python") == "True seal True True\n"


def test_where_protobufs_internals_moved_they_come_from_the_generated_module(monkeypatch: pytest.MonkeyPatch) -> None:
    from google.protobuf.internal import api_implementation

    monkeypatch.setattr(api_implementation, "_c_module", object(), raising=False)  # no default_pool there
    assert protos._on_upb() is None
    assert protos._classes() == {name: getattr(coordination_pb2, name) for name in NAMES}
