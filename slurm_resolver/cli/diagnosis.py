"""``slurm-resolver stacks JOB[.STEP]``: every task's Python stacks of a running step, from outside it.

The step's root (the lowest rank of its first node, which listens on one of the launch's
rendezvous ports) is asked; it gathers the step's stacks through the bootstrap's tree. The ask
proves that the job's own user makes it (a MUNGE credential, or a seal of the job's secret where
``SLURM_RESOLVER_SECRET`` or ``SLURM_RESOLVER_SECRET_FILE`` is set here as in the job), and the
answer proves that the job's task gives it: another user is refused (and logged by the job), and
no other server's answer is believed.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..environment import snapshot
from ..errors import ConfigurationError, ResolutionError

if TYPE_CHECKING:  # pragma: no cover
    from ..rpc.trust.seals import Authority
    from ..stacks.job import JobStacks

__all__: list[str] = []  # internal: no public names (docs/reference.md)

_STEP = re.compile(r"^(\d+)(?:\.(\d+))?$")


def parse_step(text: str) -> tuple[str, str | None]:
    """``JOB`` or ``JOB.STEP`` (numbers), as the job and the step (None: the job's one running step).

    >>> parse_step("1234.0"), parse_step("1234")
    (('1234', '0'), ('1234', None))
    """
    found = _STEP.match(text.strip())
    if found is None:
        raise ConfigurationError(f"{text!r} is not a job or step id", "give JOBID or JOBID.STEP, such as 1234.0")
    return found.group(1), found.group(2)


def chosen_step(records: Sequence[Mapping[str, str]], job: str, step: str | None) -> Mapping[str, str]:
    """The record of the step asked for: ``step``, else the job's one running step that is not its batch
    or extern step."""
    if step is not None:
        for record in records:
            if record.get("StepId") == f"{job}.{step}":
                return record
        raise ResolutionError(f"job {job} runs no step {step} (scontrol show step {job}.{step})",
                              f"list the job's steps: scontrol show step {job}")
    running = [r for r in records if re.fullmatch(rf"{job}\.\d+", r.get("StepId", ""))]
    if len(running) == 1:
        return running[0]
    if not running:
        raise ResolutionError(f"job {job} runs no step of tasks now (or is not running)",
                              f"check the job with squeue -j {job}; a step of srun must be running")
    ids = ", ".join(r["StepId"] for r in running)
    raise ConfigurationError(f"job {job} runs {len(running)} steps ({ids})", "name one: slurm-resolver stacks JOB.STEP")


def stacks(args: argparse.Namespace) -> int:
    """Print the merged stacks of a running step (and draw them with ``--svg``)."""
    from .. import slurmctl
    from ..addresses import node_address
    from ..hostlists import expand
    from ..rpc.network.ports import candidates_of
    from ..rpc.trust.choice import authority

    env = snapshot()
    job, step = parse_step(args.step)
    record = chosen_step(slurmctl.step_records(job), job, step)
    key = record["StepId"]
    try:
        tasks = int(record.get("Tasks", ""))
        first = expand(record.get("NodeList", ""), "the step's NodeList")[0]
    except (ValueError, IndexError):
        raise ResolutionError(f"scontrol's record of step {key} names no tasks or nodes: {dict(record)}",
                              "ask again once the step runs") from None
    address = node_address(first, slurmctl.node_addresses)  # the tasks' rule: its name, else Slurm's NodeAddr
    ports = list(args.ports) if args.ports else candidates_of(env, key, None, 0)
    proof = authority(None, env, key)
    found = asyncio.run(_ask(address, first, ports, proof, key, tasks, args.timeout))
    print(found)
    if args.svg:
        Path(args.svg).write_text(found.svg())
        print(f"drawn: {args.svg}", file=sys.stderr)
    return 0


async def _ask(address: str, node: str, ports: Sequence[int], proof: Authority, key: str, tasks: int,
               timeout: float) -> JobStacks:
    """The answer of the first candidate port whose server is the step's root."""
    from ..rpc.diagnosis.stacks_call import StacksRefused, ask_for_stacks
    from ..rpc.diagnosis.stacks_wire import StacksAsk
    from ..rpc.messages import WireError
    from ..rpc.network.grpc_network import GrpcNetwork
    from ..rpc.transport import LinkError, Refusal

    network = GrpcNetwork()
    tried: list[str] = []
    try:
        for port in ports:
            ask = StacksAsk(key, tasks, secrets.token_bytes(16), port, timeout, time.time(), node, None)
            try:
                return await ask_for_stacks(network.connect(address, port), proof, ask, tasks)
            except LinkError as exc:
                if exc.code is Refusal.UNAUTHENTICATED:
                    raise ConfigurationError(f"step {key}'s root (on {node}, port {port}) refused to show its "
                                             f"stacks: {exc.detail}",
                                             "ask as the job's user, on a host whose munged the job's nodes trust, "
                                             "or with the job's SLURM_RESOLVER_SECRET set") from None
                tried.append(f"{port} ({exc.code.value if exc.code else exc.kind.value})")
            except (WireError, StacksRefused) as exc:
                tried.append(f"{port} (not the job's: {exc})")
    finally:
        await network.close()
    where = node if address == node else f"{node} ({address})"  # the address only where it is not the name
    raise ResolutionError(f"no server of step {key} answered on {where}, ports "
                          f"{', '.join(tried[:6])}{' and more' if len(tried) > 6 else ''}",
                          "the step's tasks must run slurm_resolver.bootstrap() or slurm-resolver bootstrap; "
                          "where the job sets SLURM_RESOLVER_RENDEZVOUS_PORTS, pass them with --ports")
