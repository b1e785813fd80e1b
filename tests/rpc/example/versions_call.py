"""docs/protocol.md's worked example, "A new call": Versions, the Python versions the tasks of a subtree run,
fanned down the tree and merged on the way up, in a module of its own (as ``rpc/<wing>/versions_call.py``
would be in the package). Every code block of the page's section is this file's, verbatim (a test holds
them equal); only ``pb`` differs: the package's is ``from .. import protos as pb``, the test compiles
``versions.proto`` beside this file instead of adding its messages to ``coordination.proto``."""

from __future__ import annotations

import asyncio
import importlib.util
import platform
import runpy
import secrets
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_resolver.rpc.messages import Source, SourceKind, WireError
from slurm_resolver.rpc.shapes import unary
from slurm_resolver.rpc.transport import LinkError, Refusal, Refused, within
from slurm_resolver.rpc.trust.gate import Gate
from slurm_resolver.rpc.trust.seals import Authority, Purpose
from slurm_resolver.rpc.waits import Later, Settled
from slurm_resolver.rpc.wire import MOST_NAME, MOST_NONCE, Seal, envelope, parse_message, unwrap


def _compiled() -> Any:
    """Step 1 for the test: ``versions.proto`` through protoc and `proto3`'s classes of it, as
    ``scripts/generate-protos`` does the package's."""
    from grpc_tools import protoc

    here, out = Path(__file__).parent, Path(tempfile.mkdtemp(prefix="versions-pb-"))
    if protoc.main(["protoc", f"-I{here}", f"--python_out={out}", str(here / "versions.proto")]) != 0:
        raise RuntimeError("protoc failed on versions.proto")
    classes = runpy.run_path(str(here.parent.parent.parent / "scripts" / "proto3_classes.py"))["source"]
    (out / "versions_messages.py").write_text(classes(runpy.run_path(str(out / "versions_pb2.py"))["DESCRIPTOR"],
                                                      "slurm_resolver.rpc.proto3"))
    spec = importlib.util.spec_from_file_location("versions_messages", out / "versions_messages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pb = _compiled()


# 2. Its codec, bounded and checked.

@dataclass(frozen=True)
class VersionsAsk:
    """An ask for the versions of one server's subtree."""

    job_key: str
    source: int
    nonce: bytes
    port: int


def encode_ask(ask: VersionsAsk, seal: Seal) -> bytes:
    return envelope(pb.VersionsAsk(job_key=ask.job_key, source=ask.source, nonce=ask.nonce, port=ask.port), seal)


def decode_ask(header: bytes, world_size: int) -> VersionsAsk:
    message = parse_message(pb.VersionsAsk(), header)
    if len(message.job_key) > MOST_NAME or message.source >= world_size or len(message.nonce) > MOST_NONCE:
        raise WireError("an ask for versions from no task of this job")
    return VersionsAsk(message.job_key, message.source, bytes(message.nonce), message.port)


def encode_answer(counts: Mapping[str, int], nonce: bytes, source: int, seal: Seal) -> bytes:
    return envelope(pb.VersionsAnswer(nonce=nonce, source=source, counts=counts), seal)


def decode_answer(header: bytes, world_size: int) -> tuple[dict[str, int], bytes, int]:
    message = parse_message(pb.VersionsAnswer(), header)
    counts = dict(message.counts)
    if len(counts) > 64 or any(len(version) > 32 for version in counts) or sum(counts.values()) > world_size \
            or message.source >= world_size or len(message.nonce) > MOST_NONCE:
        raise WireError("a malformed answer of versions")
    return counts, bytes(message.nonce), message.source


# 3. Its part: made once for every task's server, with the gate every call meets and what the bootstrap
#    agrees later (the tasks below are known by their ports only then).

class VersionsHandler:
    """The Python versions of the tasks below this one, and of this one."""

    def __init__(self, gate: Gate, settled: Later[Settled]) -> None:
        self.gate = gate
        self.settled = settled

    async def versions(self, message: bytes, deadline: float) -> bytes:
        gate = self.gate
        ask, header, seal = gate.read(message, decode_ask)  # invalid: malformed, or beyond the job
        gate.same_launch(ask.job_key)  # foreign: another launch's
        gate.sealed("an ask for versions", ask.source, header, seal, ask.port)  # unauthenticated, or another server's
        settled = await self.settled.wait(deadline)
        if settled is None:
            raise Refused(Refusal.UNREADY, f"rank {gate.identity.rank} is not bootstrapped yet: ask again")
        counts = Counter({platform.python_version(): 1})
        for found in await asyncio.gather(*(below(settled, gate.authority, source, deadline)
                                            for source in sorted(settled.plan.sources))):
            counts.update(found)
        return encode_answer(counts, ask.nonce, gate.identity.rank, gate.seal())


async def below(settled: Settled, authority: Authority, source: Source, deadline: float) -> Counter[str]:
    """The versions of ``source``'s subtree (a task of this node, or a child node's leader); none where it
    does not answer in time."""
    placement = settled.cluster.placement
    rank = source.number if source.kind is SourceKind.TASK else int(placement.ranks_on(source.number)[0])
    try:
        with within(deadline - time.monotonic()):
            return Counter(await ask_versions(settled, authority, rank, deadline))
    except (LinkError, WireError, asyncio.TimeoutError):
        return Counter()


async def ask_versions(settled: Settled, authority: Authority, rank: int, deadline: float) -> dict[str, int]:
    """The versions of ``rank``'s subtree: an ask sealed for its server alone, the answer's seal and nonce
    checked."""
    cluster = settled.cluster
    assert cluster.bound_ports is not None
    port, nonce = cluster.bound_ports[rank], secrets.token_bytes(16)
    ask = encode_ask(VersionsAsk(cluster.launch.key, settled.plan.rank, nonce, port),
                     lambda header: authority.seal(Purpose.CALL, header))
    link = settled.network.connect(cluster.task(rank).host, port)
    header, seal = unwrap(await link.unary(VERSIONS, ask, deadline - time.monotonic()))
    counts, echoed, source = decode_answer(header, cluster.world_size)
    if not authority.check(Purpose.ANSWER, header, seal).believed or echoed != nonce or source != rank:
        raise WireError(f"an answer that is not rank {rank}'s to this ask")
    return counts


# 4. Its row.

VERSIONS = unary("Versions", VersionsHandler, VersionsHandler.versions, most_request=512)
