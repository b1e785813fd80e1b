"""Every knob of the bootstrap in one frozen value, checked once, with its precedence.

``bootstrap(cluster, timeout=30, verify="all")`` and ``bootstrap(cluster, BootstrapOptions(...))``
are the same: the keywords are sugar for this value. The choices (``exchange``, ``verify``,
``auth``) are types (`ExchangeMode`, `Verify`, `AuthChoice`); their words, as the keywords, the
command line and the variables give them, are read into those once, when the value is made, and an
unknown word is a `ConfigurationError` that names the option and its words. A value given
explicitly wins over its variable (``SLURM_RESOLVER_EXCHANGE``, ``SLURM_RESOLVER_AUTH``,
``SLURM_RESOLVER_RENDEZVOUS_PORTS``), which wins over the default; anything out of range is
a `ConfigurationError` before anything starts. The command
line's ``slurm-resolver bootstrap`` offers the same options (`FIELDS`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field, fields, replace
from typing import Any

from ..errors import ConfigurationError
from ..exchange import Exchange, ExchangeMode, parse_mode
from ..values import PublicValue, fill
from .network.ports import candidates_of
from .tree import DEFAULT_FANOUT, ONCE, Verify
from .trust.choice import MODES as AUTH_MODES
from .trust.choice import AuthChoice

__all__ = ["BootstrapOptions"]

_EXCHANGES = tuple(mode.value for mode in ExchangeMode if mode is not ExchangeMode.NONE)
"""The words of the bootstrap's ``exchange`` (it needs one: not ``'none'``)."""


def _seconds(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise ConfigurationError(f"{name}={value!r} is not a number of seconds from {low:g} to {high:g}",
                                 f"give {name} in seconds, e.g. {name}=60" if name == "timeout" else
                                 f"give {name} in seconds")


def _whole(name: str, value: object, low: int, high: int, example: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"{name}={value!r} is not a whole number from {low} to {high}", f"e.g. {example}")


class BootstrapOptions(PublicValue):
    """How the tasks bootstrap. Every field is checked when the value is made."""

    exchange: ExchangeMode | Exchange | None = field(default=None, metadata={
        "help": "how tasks exchange their records: auto (MPI under an MPI launcher or srun --mpi=pmix where MPI "
                "initialises, else the tree of node leaders), mpi, or rendezvous "
                "(default: SLURM_RESOLVER_EXCHANGE, else auto)", "choices": _EXCHANGES})
    timeout: float = field(default=60.0, metadata={
        "help": "seconds the whole bootstrap may take; a task that is missing by then is named (default: 60 s)",
        "type": float})
    port: int = field(default=0, metadata={
        "help": "the port every task's server binds (default: 0, a free port; node leaders then bind one of the "
                "launch's rendezvous ports)", "type": int})
    verify: Verify = field(default=ONCE, metadata={
        "help": "how servers are checked: once (every server by one peer, in the tree by the leader it joins, "
                "which verifies the whole table; ring is its older name), all (every pair), none, or a count of "
                "next ranks each task asks after the table (default: once)"})
    rendezvous: tuple[int, ...] | None = field(default=None, metadata={
        "help": "comma-separated ports node leaders try to bind (default: SLURM_RESOLVER_RENDEZVOUS_PORTS, else "
                "12 ports derived from the launch's key)"})
    fanout: int = field(default=DEFAULT_FANOUT, metadata={
        "help": f"child nodes per node leader in the tree (default: {DEFAULT_FANOUT})", "type": int})
    auth: AuthChoice | None = field(default=None, metadata={
        "help": "how tasks prove they belong to the job: auto (a secret where one is given, else MUNGE where "
                "munged answers, else none, said loudly), secret, munge, none "
                "(default: SLURM_RESOLVER_AUTH, else auto)", "choices": AUTH_MODES})
    heartbeat: float | None = field(default=1.0, metadata={
        "help": "seconds between two looks at a node's tasks' processes, and between two beats of progress marks, "
                "in the failure detection after the bootstrap; 0: no failure detection (default: 1 s)",
        "type": float})
    patience: float = field(default=5.0, metadata={
        "help": "seconds a task's process may be stopped, or its node silent, before it is declared dead, at "
                "least twice the heartbeat (default: 5 s)", "type": float})
    hang_after: float | None = field(default=None, metadata={
        "help": "a hang: no task's progress mark (b.progress(), slurm_resolver.progress()) advanced for this long "
                "(seconds, or 90s, 10m, 2h), or some tasks' stood still while others' advanced; the root then "
                "prints every task's stacks once and fails the step (run restarts it); it rides the heartbeats "
                "(default: never)"})

    def __init__(self, exchange: ExchangeMode | Exchange | None = None, timeout: float = 60.0, port: int = 0,
                 verify: Verify = ONCE, rendezvous: tuple[int, ...] | None = None, fanout: int = DEFAULT_FANOUT,
                 auth: AuthChoice | None = None, heartbeat: float | None = 1.0, patience: float = 5.0,
                 hang_after: float | None = None) -> None:
        fill(self, exchange, timeout, port, verify, rendezvous, fanout, auth, heartbeat, patience, hang_after)
        # A word given for a choice (the keywords, the command line; callers without types) is read here,
        # once, into its type: past this point every choice is an enum.
        if self.exchange is not None:
            mode = parse_mode(self.exchange, "exchange")
            if mode is ExchangeMode.NONE:
                raise ConfigurationError("bootstrap needs an exchange between the tasks, not exchange='none'",
                                         f"use one of {', '.join(_EXCHANGES)}")
            object.__setattr__(self, "exchange", mode)
        _seconds("timeout", self.timeout, 0.01, 30 * 24 * 3600.0)
        _whole("port", self.port, 0, 65535, "port=0 (a free port) or port=29500")
        object.__setattr__(self, "verify", Verify.parse(self.verify))
        if self.rendezvous is not None:
            ports = tuple(self.rendezvous)
            if not 0 < len(ports) <= 64:
                raise ConfigurationError(f"rendezvous={ports!r} must list 1 to 64 ports", "e.g. 30001,30002")
            for port in ports:
                _whole("a rendezvous port", port, 1, 65535, "rendezvous=30001,30002")
            object.__setattr__(self, "rendezvous", ports)
        _whole("fanout", self.fanout, 1, 4096, "fanout=8")
        if self.auth is not None:
            object.__setattr__(self, "auth", AuthChoice.parse(self.auth))
        if self.heartbeat:
            _seconds("heartbeat", self.heartbeat, 0.05, 3600.0)
            if isinstance(self.patience, bool) or not isinstance(self.patience, (int, float)) \
                    or not self.patience >= 2 * self.heartbeat:
                raise ConfigurationError(f"patience={self.patience!r} must be at least twice the heartbeat "
                                         f"({self.heartbeat} s)",
                                         "a silent task is declared dead after the patience: give it a few beats, "
                                         "e.g. patience=5 * heartbeat")
        else:
            object.__setattr__(self, "heartbeat", None)
        if self.hang_after is not None:
            _seconds("hang_after", self.hang_after, 1.0, 30 * 24 * 3600.0)
            if not self.heartbeat or self.hang_after <= self.patience:
                raise ConfigurationError(f"hang_after={self.hang_after:g} s needs failure detection, and longer than "
                                         f"its patience ({self.patience:g} s): progress rides the heartbeats",
                                         "keep heartbeat on (the default) and give hang_after in minutes, "
                                         "e.g. hang_after=600")

    @classmethod
    def of(cls, options: BootstrapOptions | None, keywords: Mapping[str, Any]) -> BootstrapOptions:
        """``options`` with ``keywords`` on top (each a field's name), checked."""
        if options is not None and not keywords:
            return options  # checked when it was made
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(keywords) - names)
        if unknown:
            raise ConfigurationError(f"bootstrap() got unknown options {unknown}", f"known: {', '.join(sorted(names))}")
        return replace(options or cls(), **keywords)

    def mode(self, env: Mapping[str, str]) -> ExchangeMode | Exchange:
        """The exchange: this value's, else ``SLURM_RESOLVER_EXCHANGE``, else ``'auto'``."""
        if self.exchange is not None:
            return self.exchange
        mode = parse_mode(env.get("SLURM_RESOLVER_EXCHANGE", "auto"), "SLURM_RESOLVER_EXCHANGE")
        if mode is ExchangeMode.NONE:
            raise ConfigurationError("SLURM_RESOLVER_EXCHANGE=none: bootstrap needs an exchange between the tasks",
                                     f"unset it, or use one of {', '.join(_EXCHANGES)}")
        return mode

    def candidates(self, env: Mapping[str, str], launch: str) -> list[int]:
        """The ports this task's leader may listen on (see `candidates_of()`)."""
        return candidates_of(env, launch, self.rendezvous, self.port)


FIELDS: tuple[Any, ...] = tuple(fields(BootstrapOptions))
"""The options with their help, as the command line offers them."""

