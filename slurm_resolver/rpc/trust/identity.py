"""WhoAreYou: a question to a server, what it says of itself (built and read here), the asking and the answer.

Like every message of the bootstrap (`slurm_resolver.rpc.wire`), each is an envelope sealed by
its writer, checked before it is believed.
"""

from __future__ import annotations

from ...values import Value, fill
from .. import protos as pb
from ..messages import Identity, WireError
from ..primitives import fresh
from ..shapes import unary
from ..transport import Link, Refusal, Refused, retrying
from ..wire import MOST_NAME, MOST_NONCE, NONCE, Seal, envelope, parse_message, unwrap
from .gate import Gate
from .seals import Authority, Purpose

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Question(Value):
    """A WhoAreYou call: who asks, which server, and in which part of the bootstrap."""

    __slots__ = ("job_key", "source", "nonce", "port", "early")
    job_key: str
    source: int
    """The rank asking."""
    nonce: bytes
    port: int
    """The port of the server asked."""
    early: bool
    """Asked in the first round (by the leader the server's task joins it at): sealed as that
    round's calls and answers are, before anyone knows the launch's key."""

    def __init__(self, job_key: str, source: int, nonce: bytes, port: int, early: bool = False) -> None:
        fill(self, job_key, source, nonce, port, early)


def encode_who(question: Question, seal: Seal) -> bytes:
    """A question to the server on ``question.port``."""
    return envelope(pb.Who(job_key=question.job_key, source=question.source, nonce=question.nonce,
                            port=question.port, early=question.early), seal)


def decode_who(header: bytes, world_size: int) -> Question:
    """A question, checked."""
    message = parse_message(pb.Who(), header)
    if len(message.job_key) > MOST_NAME or message.source >= world_size or len(message.nonce) > MOST_NONCE:
        raise WireError("a question from no task of this job")
    return Question(message.job_key, message.source, bytes(message.nonce), message.port, message.early)


def encode_identity(identity: Identity, nonce: bytes, seal: Seal) -> bytes:
    """What a server says of itself, to the question of ``nonce``."""
    return envelope(pb.Identity(job_key=identity.job_key, rank=identity.rank, node=identity.node,
                                 job=identity.job, index=identity.index, nonce=nonce), seal)


def decode_identity(header: bytes) -> tuple[Identity, bytes]:
    """A server's identity and the nonce it answers, checked."""
    message = parse_message(pb.Identity(), header)
    if max(len(message.job_key), len(message.node), len(message.job)) > MOST_NAME or len(message.nonce) > MOST_NONCE:
        raise WireError("an identity with overlong names")
    return Identity(message.job_key, message.rank, message.node, message.job, message.index), bytes(message.nonce)


class IdentityHandler:
    """The server's side of WhoAreYou, a part of a task's server: this task's identity, sealed, to a task
    of its job that asks (from the start: it needs nothing of what the bootstrap agrees later).

    Args:
        gate: the checks every call to this server meets (its identity is this task's).
        settled: what the bootstrap agrees later (unused).
    """

    def __init__(self, gate: Gate, settled: object = None) -> None:
        del settled
        self.gate = gate

    async def who(self, message: bytes, deadline: float) -> bytes:
        """This server's identity, sealed, for a task of this job that asks; raises `Refused`."""
        del deadline  # answered at once: a server that cannot check the seal yet says so
        gate = self.gate
        question, header, seal = gate.read(message, decode_who)
        gate.same_launch(question.job_key)
        if question.early and gate.authority.past_first_round:
            # This task holds the table: its leader asked long ago. Nobody gets a first-round answer
            # (under MUNGE, a credential carrying the launch's key) from it any more.
            raise Refused(Refusal.INVALID, f"rank {gate.identity.rank} is past the first round: ask with its seal")
        gate.sealed("an identity call", question.source, header, seal, question.port, question.early)
        return encode_identity(gate.identity, question.nonce, gate.seal(question.early))


WHO = unary("WhoAreYou", IdentityHandler, IdentityHandler.who)
"""Who this server is."""


class Unproven(Exception):
    """A server answered WhoAreYou without this job's seal, or with an answer to another question."""


async def identify(link: Link, authority: Authority, question: Question, deadline: float) -> Identity:
    """Who the server at the other end of ``link`` says it is, proven by its seal; asked again (each
    time with a nonce and seal of its own: a MUNGE credential is good for one decoding) while it is
    not ready, until ``deadline`` (``time.monotonic()``). ``question``'s nonce is replaced.

    Raises `LinkError` (no answer, or a refusal), `WireError` (a malformed answer) or `Unproven`.
    """
    async def asked(left: float) -> tuple[bytes, bytes]:
        nonce = fresh(NONCE)
        message = encode_who(Question(question.job_key, question.source, nonce, question.port, question.early),
                             lambda header: authority.seal(Purpose.CALL, header, question.early))
        return nonce, await link.unary(WHO, message, left)

    nonce, reply = await retrying(asked, deadline)
    header, seal = unwrap(reply)
    said, echoed = decode_identity(header)
    checked = authority.check(Purpose.ANSWER, header, seal, question.early)
    if not checked.believed:
        raise Unproven(checked.why)
    if echoed != nonce:
        raise Unproven("an answer to another call")
    return said
