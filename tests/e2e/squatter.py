"""A squatter: another user's gRPC server on a port a launch's tasks probe, answering every call
with a forged table that names itself as every task (what a task must never believe), or (MODE)
refusing it as a leader would (``invalid``, ``deadline``, ``unauthenticated``), or holding it
without a word (``silent``). An ask for stacks that reaches it (``slurm-resolver stacks`` trying
the rendezvous ports) is kept in ``LOG.ask`` and answered UNAVAILABLE, so that the user's command
goes on to the next port; ``replay`` then sends the kept ask to another server.

    python squatter.py HOST PORT WORLD_SIZE LOG [MODE]
    python squatter.py replay HOST PORT ASK_FILE     (prints ANSWERED, or the refusal's code and words)

Runs as another user, with only grpcio, protobuf and slurm_resolver's generated messages.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from slurm_resolver.rpc import coordination_pb2 as pb

SERVICE = "/slurm_resolver.v4.Coordination"


def replay(host: str, port: int, kept: str) -> None:
    """Send the ask kept in ``kept`` to ``host:port``; print what came back."""
    with open(kept, "rb") as f, grpc.insecure_channel(f"{host}:{port}") as channel:
        try:
            answer = channel.unary_unary(f"{SERVICE}/Stacks")(f.read(), timeout=20)
            print(f"ANSWERED {len(answer)} bytes: {answer!r}", flush=True)
        except grpc.RpcError as exc:
            print(f"{exc.code().name}: {exc.details()}", flush=True)


def main() -> None:
    if sys.argv[1] == "replay":
        replay(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    host, port, world, log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    mode = sys.argv[5] if len(sys.argv) > 5 else "forge"
    refusals = {"invalid": (grpc.StatusCode.INVALID_ARGUMENT, "invalid: a malformed call (DecodeError)"),
                "deadline": (grpc.StatusCode.DEADLINE_EXCEEDED, "deadline: worker:0 (rank 0) on node1, which gathers "
                             "the bootstrap for 4 tasks, still waited for ranks 2"),
                "unauthenticated": (grpc.StatusCode.UNAUTHENTICATED, "unauthenticated: a seal not made with this "
                                    "launch's key: not a task of this launch")}

    def forged(first: bytes, context: Any) -> list[bytes]:
        call = pb.Call.FromString(pb.Envelope.FromString(first).header)
        with open(log, "a") as f:
            f.write(f"call from rank {call.source} for {call.round.kind}\n")
        if mode == "silent":
            threading.Event().wait(120)
        if mode in refusals:
            context.abort(*refusals[mode])
        column = port.to_bytes(2, "little") * world  # 2 bytes a port
        chunk = pb.Records(ports=column, spare_ports=column, first=0).SerializeToString()
        answer = pb.Answer(nonce=call.nonce, source=0, total=world, chunks=[hashlib.sha256(chunk).digest()[:16]],
                           key=b"k" * 32)
        return [pb.Envelope(header=answer.SerializeToString(), seal=b"forged" * 5).SerializeToString(), chunk]

    def bundled(request: bytes, context: Any) -> bytes:
        return pb.Bundle(messages=forged(pb.Bundle.FromString(request).messages[0], context)).SerializeToString()

    def streamed(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        yield from forged(next(requests), context)

    def kept(request: bytes, context: Any) -> bytes:
        with open(f"{log}.ask", "wb") as f:
            f.write(request)
        context.abort(grpc.StatusCode.UNAVAILABLE, "not here")

    methods = {f"{SERVICE}/JoinBundled": grpc.unary_unary_rpc_method_handler(bundled),
               f"{SERVICE}/Join": grpc.stream_stream_rpc_method_handler(streamed),
               f"{SERVICE}/Stacks": grpc.unary_unary_rpc_method_handler(kept)}

    class Handlers(grpc.GenericRpcHandler):
        def service(self, details: Any) -> Any:
            return methods.get(details.method)

    server = grpc.server(futures.ThreadPoolExecutor(64), options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((Handlers(),))
    server.add_insecure_port(f"{host}:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
