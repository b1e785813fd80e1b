"""How an attempt of `slurm-resolver run` ended and where the next one runs: tables of outcomes and nodes."""

from __future__ import annotations

import pytest

from slurm_resolver.attempts import Kind, NextAttempt, RestartPolicy, Shape, Verdict, decide, verdict
from slurm_resolver.errors import ConfigurationError, EnvironmentVariableError
from slurm_resolver.faults import Cause, Fault
from slurm_resolver.outcome import Outcome

SHAPE = Shape(("n1", "n2", "n3"), (2, 2, 2))


def task(rank: int) -> str:
    return f"worker:{rank} (rank {rank}) on n{rank // 2 + 1}"


def outcome(rank: int, cause: Cause, reason: str, heard: tuple[int, ...] = (), oom: bool = False,
            at: float = 100.0, status: int | None = None) -> Outcome:
    deaths = tuple(Fault(Cause.CRASHED, f"{task(r)} died", 0, r, f"n{r // 2 + 1}") for r in heard)
    status = (-9 if "signal 9" in reason else 1) if status is None else status
    return Outcome(task(rank), Fault(cause, reason, status, rank, f"n{rank // 2 + 1}", at, oom), deaths)


KILLED_3 = outcome(3, Cause.EXITED, "exited with signal 9 (SIGKILL)", at=100.0)
STOPPED_0 = outcome(0, Cause.LEFT, "stopped", heard=(3,), at=101.0, status=-15)
RAISED = "exited with code 1: ValueError: a bad batch"


@pytest.mark.parametrize(("outcomes", "kind", "reason", "losses"), [
    ([KILLED_3, STOPPED_0], Kind.DEATH, "worker:3 (rank 3) on n2: its command exited with signal 9 (SIGKILL)",
     [(3, "n2", False)]),
    ([outcome(0, Cause.LEFT, "stopped", heard=(2, 3))], Kind.DEATH,
     "worker:2 (rank 2) on n2 died (its task is gone too); worker:3 (rank 3) on n2 died (its task is gone too)",
     [(2, "n2", True), (3, "n2", True)]),
    ([outcome(r, Cause.EXITED, "exited with code 1: RuntimeError: gloo", heard=(3,)) for r in (0, 1, 2)]
     + [KILLED_3], Kind.DEATH, "worker:3 (rank 3) on n2: its command exited with signal 9 (SIGKILL)",
     [(3, "n2", False)]),
    ([outcome(r, Cause.EXITED, RAISED) for r in range(4)], Kind.EVERYWHERE, f"every task's command {RAISED}", []),
    ([outcome(r, Cause.EXITED, RAISED, heard=(3,) if r < 3 else ()) for r in range(4)], Kind.EVERYWHERE,
     f"every task's command {RAISED}", []),
    ([outcome(r, Cause.UNSTARTED, "cannot run 'x'", status=127) for r in range(4)], Kind.EVERYWHERE,
     "every task's command cannot run 'x'", []),
    ([outcome(1, Cause.EXITED, RAISED), outcome(0, Cause.LEFT, "stopped", heard=(1,))], Kind.FAILURE,
     f"worker:1 (rank 1) on n1: its command {RAISED}", []),
    ([outcome(0, Cause.LEFT, "stopped: a peer died", status=-15)], Kind.UNEXPLAINED, "the step failed", []),
    ([], Kind.UNEXPLAINED, "the step failed (srun exited with 1) before any task's command ended on its own", []),
])
def test_an_attempt_ended_by(outcomes: list[Outcome], kind: Kind, reason: str,
                             losses: list[tuple[int, str, bool]]) -> None:
    ended = verdict({o.rank: o for o in outcomes}, 4, 1)
    assert ended.kind is kind and ended.reason.startswith(reason), ended
    assert [(loss.rank, loss.node, loss.rank in ended.vanished) for loss in ended.losses] == losses
    assert ended.at == (min(o.fault.at for o in outcomes) if outcomes else None)


def test_a_death_is_told_from_a_failure_by_its_cause_and_status_not_its_words() -> None:
    """A task that stopped its command (SIGTERM) for a peer's death is no death; one whose command a signal ended
    is, whatever its words say."""
    stopped = outcome(1, Cause.LEFT, "exited with signal 9 (SIGKILL)", status=-9)  # words of a death, a LEFT cause
    quiet = outcome(2, Cause.EXITED, "ended", status=-11)
    assert verdict({1: stopped}, 4, 1).kind is Kind.UNEXPLAINED
    assert verdict({2: quiet}, 4, 1).kind is Kind.DEATH


def test_many_deaths_are_listed_briefly() -> None:
    ended = verdict({0: outcome(0, Cause.LEFT, "stopped", heard=tuple(range(1, 12)))}, 12, 1)
    assert ended.reason.endswith("; and 8 more") and len(ended.losses) == 11


DEATH = Verdict(Kind.DEATH, "rank 3 died", (verdict({3: KILLED_3}, 4, 1).losses))
GONE = verdict({0: outcome(0, Cause.LEFT, "stopped", heard=(2, 3))}, 4, 1)
OOM = verdict({3: outcome(3, Cause.EXITED, "exited with signal 9 (SIGKILL), by the kernel's OOM killer",
                          oom=True)}, 4, 1)
FAILURE = Verdict(Kind.FAILURE, "rank 1 raised", failures=frozenset({(Cause.EXITED, 1)}))
N12 = ("n1", "n2")


@pytest.mark.parametrize(("policy", "number", "ended", "unhealthy", "before", "nodes", "why"), [
    (RestartPolicy(3), 1, DEATH, {}, None, N12, "restart 1 of 3 on n[1-2] (the same nodes)"),
    (RestartPolicy(3, 1), 1, GONE, {"n2": "its slurmd does not answer"}, None, ("n1", "n3"),
     "restart 1 of 3 on n[1,3]: n2 (its slurmd does not answer) left behind, with spare n3"),
    (RestartPolicy(3, 1), 1, OOM, {}, None, ("n1", "n3"),
     "restart 1 of 3 on n[1,3]: n2 (the kernel's OOM killer ended its task) left behind, with spare n3"),
    (RestartPolicy(3, 1), 1, GONE, {"n2": "down", "n3": "Slurm marks it DOWN"}, None, None,
     "not restarted: n2 (down) left behind, no spare node is left (--spare-nodes 1) and the program needs 2 nodes"),
    (RestartPolicy(3), 4, DEATH, {}, None, None, "restarts exhausted (--restarts 3)"),
    (RestartPolicy(3), 4, GONE, {"n2": "down"}, None, None, "restarts exhausted (--restarts 3); bad nodes: n2 (down)"),
    (RestartPolicy(0), 1, DEATH, {}, None, None, "restarts exhausted (--restarts 0)"),
    (RestartPolicy(3), 1, Verdict(Kind.EVERYWHERE, "x", failures=frozenset({(Cause.EXITED, 1)})), {}, None, None,
     "not restarted: the program's own error (a restart would fail the same way)"),
    (RestartPolicy(3), 1, FAILURE, {}, None, N12, "restart 1 of 3 on n[1-2] (the same nodes)"),
    (RestartPolicy(3), 2, FAILURE, {}, FAILURE, None, "not restarted: the same failure as attempt 1"),
    (RestartPolicy(3), 2, FAILURE, {}, DEATH, N12, "restart 2 of 3"),
    (RestartPolicy(3), 1, Verdict(Kind.UNEXPLAINED, "x"), {}, None, None, "not restarted: no task died and every node"),
    (RestartPolicy(3, 1), 1, Verdict(Kind.UNEXPLAINED, "x"), {"n1": "Slurm marks it DOWN"}, None, ("n2", "n3"),
     "restart 1 of 3 on n[2-3]: n1 (Slurm marks it DOWN) left behind, with spare n3"),
])
def test_the_next_attempt(policy: RestartPolicy, number: int, ended: Verdict, unhealthy: dict[str, str],
                          before: Verdict | None, nodes: tuple[str, ...] | None, why: str) -> None:
    decision = decide(policy, SHAPE, N12, number, ended, unhealthy, frozenset(), before)
    assert decision.nodes == nodes and decision.why.startswith(why), decision


@pytest.mark.parametrize(("policy", "nodes", "why"), [
    (RestartPolicy(3, 0, 1), ("n1",), "restart 1 of 3 on n1: n2 (down) left behind, on 1 of 2 nodes"),
    (RestartPolicy(3), None, "not restarted: n2 (down) left behind, no spare node is left (--spare-nodes 0) and the "
     "program needs 2 nodes (--min-nodes)"),
])
def test_without_a_spare_the_step_shrinks_or_ends_naming_the_node(policy: RestartPolicy, nodes: tuple[str, ...] | None,
                                                                  why: str) -> None:
    decision = decide(policy, Shape(N12, (2, 2)), N12, 1, GONE, {"n2": "down"})
    assert decision == NextAttempt(nodes, why)


def test_a_node_left_behind_is_never_taken_again() -> None:
    decision = decide(RestartPolicy(3, 2), Shape(("n1", "n2", "n3", "n4"), (1, 1, 1, 1)), ("n1", "n3"), 2, GONE,
                      {"n2": "down"}, frozenset({"n2"}))
    assert decision == NextAttempt(("n1", "n3"), "restart 2 of 3 on n[1,3] (the same nodes)")
    decision = decide(RestartPolicy(3, 2), Shape(("n1", "n2", "n3", "n4"), (1, 1, 1, 1)), ("n1", "n3"), 2,
                      verdict({0: outcome(0, Cause.LEFT, "stopped", heard=(5,))}, 2, 1),
                      {"n3": "down"}, frozenset({"n2"}))
    assert decision.nodes == ("n1", "n4")


@pytest.mark.parametrize(("first", "second", "restarted"), [
    ((1, Cause.EXITED, "exited with code 1: ValueError: a bad batch"),
     (3, Cause.EXITED, "exited with code 1: KeyError: 'lr'"), False),  # other words, the same cause and status
    ((1, Cause.EXITED, RAISED), (1, Cause.EXITED, RAISED.replace("code 1", "code 2")), True),  # another status
    ((1, Cause.EXITED, RAISED), (1, Cause.UNSTARTED, RAISED), True),  # the same words, another cause
])
def test_the_same_failure_twice_is_decided_on_causes_and_statuses(
        first: tuple[int, Cause, str], second: tuple[int, Cause, str], restarted: bool) -> None:
    def ended(rank: int, cause: Cause, reason: str) -> Verdict:
        return verdict({rank: outcome(rank, cause, reason, status=2 if "code 2" in reason else 1)}, 4, 1)

    before, after = ended(*first), ended(*second)
    assert before.kind is after.kind is Kind.FAILURE
    decision = decide(RestartPolicy(3), SHAPE, N12, 2, after, {}, frozenset(), before)
    assert (decision.nodes is not None) is restarted, decision
    assert restarted or decision.why == "not restarted: the same failure as attempt 1"


def test_the_shape_of_the_allocation() -> None:
    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "3,2(x2)"}
    assert Shape.of(env) == Shape(("n1", "n2", "n3"), (3, 2, 2)) and Shape.of(env).per_node is None
    with pytest.raises(EnvironmentVariableError, match="SLURM_JOB_ID is not set"):
        Shape.of({})
    with pytest.raises(ConfigurationError, match="does not restart heterogeneous jobs"):
        Shape.of({**env, "SLURM_HET_SIZE": "2"})


@pytest.mark.parametrize(("policy", "shape", "error"), [
    (RestartPolicy(-1), SHAPE, "--restarts -1 is not a count"),
    (RestartPolicy(3, 3), SHAPE, "--spare-nodes 3 leaves no node of the job's 3 to run on"),
    (RestartPolicy(3, 1, 3), SHAPE, "--min-nodes 3 is not from 1 to the 2 nodes"),
    (RestartPolicy(3, 0, 0), SHAPE, "--min-nodes 0 is not from 1"),
    (RestartPolicy(3, 1), Shape(("n1", "n2"), (2, 1)), r"different task counts \(2,1\), so another node cannot"),
    (RestartPolicy(3, 0, 1), Shape(("n1", "n2"), (2, 1)), "different task counts"),
])
def test_impossible_policies_are_refused_with_the_fix(policy: RestartPolicy, shape: Shape, error: str) -> None:
    with pytest.raises(ConfigurationError, match=error):
        policy.first_nodes(shape)


def test_a_layout_of_uneven_nodes_runs_whole_without_spares() -> None:
    assert RestartPolicy(3).first_nodes(Shape(("n1", "n2"), (2, 1))) == ("n1", "n2")
