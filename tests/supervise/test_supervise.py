"""``bootstrap -- COMMAND`` supervision: the command ends the task, a peer's death ends the command
and its whole process group, signals reach the group, and what the command came to is recorded
where ``slurm-resolver run`` asks for it."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from slurm_resolver.cluster import Task as ClusterTask
from slurm_resolver.errors import ConfigurationError, ResolutionError
from slurm_resolver.faults import Cause, Fault
from slurm_resolver.outcome import Recording, bootstrapped_at, read_all
from slurm_resolver.supervise import supervise


def peer_died(words: str) -> Fault:
    """A peer's death as failure detection reports it: its process died."""
    return Fault(Cause.CRASHED, words)


class Task:
    """The parts of a bootstrapped task that supervision uses."""

    def __init__(self, rank: int = 3) -> None:
        self.rank = rank
        self.world_size = 8
        self.job_key = "77.0"
        self.me = self.task(rank)
        self.callbacks: list[Callable[[int, Fault], None]] = []
        self.stopped = False

    def task(self, rank: int) -> ClusterTask:
        node = f"node{rank // 2 + 1}"
        return ClusterTask(rank, "worker", rank, node, node, 8888 + rank % 2, rank % 2)

    def on_fault(self, callback: Callable[[int, Fault], None]) -> None:
        """As failure detection calls back: each fault recorded for its task, on its node, when heard of."""
        self.callbacks.append(lambda rank, fault: callback(rank, fault.of(rank, self.task(rank).node, time.time())))

    def stop(self) -> None:
        self.stopped = True

    def fail(self, why: str, cause: Cause = Cause.REPORTED, status: int = 0) -> None:
        self.failed = why
        self.cause, self.status = cause, status

    def watch_command(self) -> dict[str, str]:
        return {}


def test_a_command_that_succeeds_ends_the_task_normally() -> None:
    task = Task()
    assert supervise(task, [sys.executable, "-c", "pass"]) == 0 and task.stopped  # type: ignore[arg-type]


def test_a_peer_death_stops_the_command_and_names_the_peer() -> None:
    task = Task()
    threading.Timer(0.5, lambda: task.callbacks[0](5, peer_died("worker:5 (rank 5) on node3 died"))).start()
    started = time.monotonic()
    with pytest.raises(ResolutionError) as info:
        supervise(task, [sys.executable, "-c", "import time; time.sleep(60)"], grace=1.0)  # type: ignore[arg-type]
    assert time.monotonic() - started < 5 and task.stopped
    assert "worker:5 (rank 5) on node3 died; stopped this task's command" in info.value.message


def test_a_peer_death_is_said_by_the_lowest_live_rank_alone() -> None:
    """Every surviving task raises it; the lowest rank it knows alive says it (Speaker.TASK), the others
    end without a word (Speaker.ABOVE: the command line prints nothing for them)."""
    from slurm_resolver.speakers import Speaker

    for rank, dead, says in ((1, 0, True), (2, 0, False), (0, 5, True), (3, 5, False)):
        task = Task(rank)
        threading.Timer(0.3, lambda t=task, d=dead: t.callbacks[0](d, peer_died(f"worker:{d} (rank {d}) died"))).start()
        with pytest.raises(ResolutionError) as info:
            supervise(task, [sys.executable, "-c", "import time; time.sleep(60)"], grace=1.0)  # type: ignore[arg-type]
        assert info.value.speaker is (Speaker.TASK if says else Speaker.ABOVE), rank
        assert info.value.said_by(rank) is says, rank


def test_a_command_that_cannot_start_is_named_and_a_failure() -> None:
    task = Task()
    with pytest.raises(ConfigurationError, match="cannot run 'no-such-command-xyz'"):
        supervise(task, ["no-such-command-xyz"])  # type: ignore[arg-type]
    assert "worker:3 (rank 3) on node2: cannot run 'no-such-command-xyz'" in task.failed  # the others stop


def test_a_command_that_cannot_start_anywhere_is_said_by_the_lowest_rank_that_failed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task runs the same command: where it cannot start, the lowest rank that failed says it for
    the job, and a task that hears a lower rank fail alike ends without a word."""
    from slurm_resolver import supervise as supervised
    from slurm_resolver.speakers import Speaker

    monkeypatch.setattr(supervised, "NOTICE", 0.5)
    why = "worker:1 (rank 1) on node1: cannot run 'no-such-command-xyz': No such file or directory"
    for rank, lower, says in ((0, None, True), (3, None, True), (3, 1, False), (3, 5, True)):
        task = Task(rank)
        if lower is not None:
            unstarted = Fault(Cause.UNSTARTED, why.replace("rank 1", f"rank {lower}"), 127)
            threading.Timer(0.1, lambda t=task, r=lower, f=unstarted: t.callbacks[0](r, f)).start()
        started = time.monotonic()
        with pytest.raises(ConfigurationError) as info:
            supervise(task, ["no-such-command-xyz"])  # type: ignore[arg-type]
        assert info.value.speaker is (Speaker.TASK if says else Speaker.ABOVE), (rank, lower)
        assert time.monotonic() - started < (0.3 if rank == 0 or not says else 2.0), "rank 0 never waits"


def test_a_command_that_fails_just_after_a_peer_died_blames_the_peer() -> None:
    """A collective breaks when a peer dies, often before the news of its death arrives."""
    task = Task()
    threading.Timer(0.5, lambda: task.callbacks[0](5, peer_died("worker:5 (rank 5) on node3 died"))).start()
    with pytest.raises(ResolutionError) as info:
        supervise(task, [sys.executable, "-c", "raise SystemExit(3)"])  # type: ignore[arg-type]
    assert "worker:5 (rank 5) on node3 died; then this task's command" in info.value.message
    assert "exited with code 3" in info.value.message and not hasattr(task, "failed") and task.stopped


def test_a_command_that_failed_as_the_dead_peers_did_says_so_briefly() -> None:
    task = Task()
    reason = "exited with code 1: ValueError: bad learning rate"
    exited = Fault(Cause.EXITED, f"worker:5 (rank 5) on node3: its command {reason}", 1)
    threading.Timer(1.0, lambda: task.callbacks[0](5, exited)).start()
    code = "import sys; sys.exit('ValueError: bad learning rate')"
    with pytest.raises(ResolutionError) as info:
        supervise(task, [sys.executable, "-c", code], grace=5.0)  # type: ignore[arg-type]
    assert info.value.message == f"bootstrap: worker:5 (rank 5) on node3: its command {reason}; so did this " \
                                 f"task's command ({sys.executable})"


def gone(pid: int, within: float = 3.0) -> bool:
    """Whether process ``pid`` has ended (reaped, or a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(("script", "grace", "took"), [
    ("sleep 60 & echo $! > {pids}; wait", 10.0, (0.0, 3.0)),  # stopped at once: SIGTERM to the whole group
    ("trap '' TERM; (trap '' TERM; sleep 60) & echo $! > {pids}; wait; wait", 1.0, (1.0, 4.0)),  # SIGKILL after
], ids=["a shell script's child", "children that ignore SIGTERM"])
def test_a_peer_death_stops_the_commands_whole_process_group(tmp_path: Path, script: str, grace: float,
                                                             took: tuple[float, float]) -> None:
    """A shell script whose child sleeps: SIGTERM to the shell alone would leave the child running."""
    task = Task()
    pids = tmp_path / "pids"
    died: list[float] = []

    def die() -> None:  # once the script's traps are set (it wrote its child's pid): a loaded machine starts bash late
        deadline = time.monotonic() + 30
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.01)
        died.append(time.monotonic())
        task.callbacks[0](5, peer_died("worker:5 (rank 5) on node3 died"))

    threading.Timer(0.5, die).start()
    with pytest.raises(ResolutionError, match="worker:5 .rank 5. on node3 died; stopped this task's command"):
        supervise(task, ["bash", "-c", script.format(pids=pids)], grace=grace)  # type: ignore[arg-type]
    assert took[0] <= time.monotonic() - died[0] < took[1]
    assert gone(int(pids.read_text()))


def test_signals_to_the_task_reach_the_commands_group(tmp_path: Path) -> None:
    """Slurm's warning (here SIGUSR1) goes to the shell and to its children alike."""
    task = Task()
    pids = tmp_path / "pids"
    script = f"trap 'exit 0' USR1; sleep 60 & echo $! > {pids}; wait"

    def warn() -> None:
        while not pids.exists() or not pids.read_text().strip():
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=warn, daemon=True).start()
    assert supervise(task, ["bash", "-c", script]) == 0  # type: ignore[arg-type]
    assert gone(int(pids.read_text()))


def test_a_signal_that_comes_as_the_command_starts_is_held_and_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's warning (SIGUSR1) in the moment before the command exists: held, then passed on to the command's
    group, which it ends (a command with no trap for it); before, it took its default action on this task
    itself (SIGUSR1 terminates), and the command was never told."""
    from slurm_resolver import supervise as supervise_module
    from slurm_resolver.supervise.command import Child

    class Early(Child):
        def __init__(self, *args: object, **kwargs: object) -> None:
            os.kill(os.getpid(), signal.SIGUSR1)  # before the command's process exists
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    class Exited(Exception):
        pass

    def exit_(code: int) -> None:  # a failed command ends the task with os._exit: here, an exception
        raise Exited(code)

    monkeypatch.setattr(supervise_module, "Child", Early)
    monkeypatch.setattr(supervise_module.os, "_exit", exit_)
    task = Task()
    started = time.monotonic()
    with pytest.raises(Exited) as exited:
        supervise(task, ["sleep", "30"])  # type: ignore[arg-type]
    assert exited.value.args == (128 + signal.SIGUSR1,) and time.monotonic() - started < 10
    assert task.cause is Cause.EXITED and task.status == -signal.SIGUSR1  # its command ended by the signal passed on


def test_the_command_gets_rendezvous_ports_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from slurm_resolver.rpc.network.ports import rendezvous_ports

    monkeypatch.delenv("SLURM_RESOLVER_RENDEZVOUS_PORTS", raising=False)
    out = tmp_path / "ports"
    code = f"import os; open({str(out)!r}, 'w').write(os.environ['SLURM_RESOLVER_RENDEZVOUS_PORTS'])"
    assert supervise(Task(), [sys.executable, "-c", code]) == 0  # type: ignore[arg-type]
    ports = [int(p) for p in out.read_text().split(",")]
    assert len(ports) >= 12 and not set(ports) & set(rendezvous_ports("77.0"))
    assert "SLURM_RESOLVER_RENDEZVOUS_PORTS" not in os.environ  # the task's own environment is left alone


def recording(tmp_path: Path, attempt: int = 1, failed_at: float | None = None) -> dict[str, str]:
    return Recording(tmp_path, attempt, failed_at).variables()


def test_a_stopped_command_is_recorded_by_the_lowest_live_rank(tmp_path: Path) -> None:
    for rank, victim in ((2, 5), (1, 0)):
        task = Task(rank)
        threading.Timer(0.3, lambda t=task, v=victim: t.callbacks[0](v, peer_died("a peer died"))).start()
        assert supervise(task, ["sleep", "30"], environ=recording(tmp_path)) == 1  # type: ignore[arg-type]
    outcomes = read_all(tmp_path)
    assert list(outcomes) == [1]  # rank 2 knows rank 0 alive: only rank 1, which heard of rank 0, wrote
    assert outcomes[1].fault.signature == (Cause.LEFT, -signal.SIGTERM) and not outcomes[1].fault.killed
    assert [(d.rank, d.node, d.cause, d.words) for d in outcomes[1].heard] == [(0, "node1", Cause.CRASHED,
                                                                                "a peer died")]
    assert abs(outcomes[1].heard[0].at - time.time()) < 30 and outcomes[1].fault.at == outcomes[1].heard[0].at


def test_a_command_that_failed_after_a_peer_died_is_recorded_with_its_error(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]
                                                                            ) -> None:
    task = Task()
    threading.Timer(0.8, lambda: task.callbacks[0](5, peer_died("worker:5 (rank 5) on node3 died"))).start()
    code = "import sys; sys.stderr.write('RuntimeError: gloo: connection closed\\n'); sys.exit(1)"
    assert supervise(task, [sys.executable, "-c", code], environ=recording(tmp_path)) == 1  # type: ignore[arg-type]
    assert "slurm-resolver" not in capsys.readouterr().err, "under run, run says it once for the job"
    outcome = read_all(tmp_path)[3]
    assert (outcome.fault.signature, outcome.task) == ((Cause.EXITED, 1), "worker:3 (rank 3) on node2")
    assert outcome.fault.words == "exited with code 1: RuntimeError: gloo: connection closed"
    assert [d.rank for d in outcome.heard] == [5] and abs(outcome.fault.at - time.time()) < 5


def test_rank_0_records_when_the_attempt_was_bootstrapped(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    failed_at = time.time() - 4.0
    assert supervise(Task(0), ["true"], environ=recording(tmp_path, 2, failed_at)) == 0  # type: ignore[arg-type]
    at = bootstrapped_at(tmp_path)
    assert at is not None and 3.9 < at - failed_at < 10
    assert "slurm-resolver: attempt 2: every task bootstrapped 4." in capsys.readouterr().err
    assert read_all(tmp_path) == {}  # a command that succeeds records nothing


def test_the_command_that_cannot_start_is_recorded(tmp_path: Path) -> None:
    task = Task()
    assert supervise(task, ["no-such-command-xyz"], environ=recording(tmp_path)) == 127  # type: ignore[arg-type]
    outcome = read_all(tmp_path)[3]
    assert outcome.fault.signature == (Cause.UNSTARTED, 127)
    assert "cannot run 'no-such-command-xyz'" in outcome.fault.words


OWN_FAILURE = """
import sys
from pathlib import Path
from slurm_resolver import supervise as module
from slurm_resolver.cluster import Task as ClusterTask
from slurm_resolver.outcome import Recording

class Task:
    rank, world_size, job_key = 3, 8, "77.0"
    me = ClusterTask(3, "worker", 3, "node2", "node2", 8889, 1)
    def task(self, rank): return self.me
    def on_fault(self, callback): pass
    def fail(self, why, cause, status): print("FAILED:", why, cause.value, status, flush=True)
    def stop(self): pass
    def watch_command(self): return {}

counts = iter([7, 8])  # the node's count of OOM kills rises while the command runs
module._oom_kills = lambda: next(counts)
module.supervise(Task(), sys.argv[2:], environ=Recording(Path(sys.argv[1])).variables())
"""


@pytest.mark.parametrize(("command", "status", "reason"), [
    (["bash", "-c", "kill -9 $$"], -9, "exited with signal 9 (SIGKILL), by the kernel's OOM killer"),
    ([sys.executable, "-c", "raise ValueError('a bad batch')"], 1, "exited with code 1: ValueError: a bad batch"),
], ids=["the OOM killer", "an exception"])
def test_a_command_that_fails_on_its_own_fails_the_task_and_is_recorded(tmp_path: Path, command: list[str],
                                                                         status: int, reason: str) -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-c", OWN_FAILURE, str(tmp_path), *command], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == (137 if status < 0 else 1), out.stderr
    # beside the words, the cause and the exit status
    assert f"FAILED: worker:3 (rank 3) on node2: its command {reason} exited {status}" in out.stdout
    own = read_all(tmp_path)[3].fault
    assert (own.signature, own.words, own.oom, own.killed, own.node) == ((Cause.EXITED, status), reason, status < 0,
                                                                         status < 0, "node2")


def test_oom_kills_are_counted_in_the_tasks_own_cgroup_where_it_has_one(tmp_path: Path) -> None:
    """cgroup v2 (Slurm's task/cgroup): the task's own memory.events, not the node's count, which
    another job's OOM kill raises too; without it, /proc/vmstat; without both, unknown."""
    from slurm_resolver.supervise.command import oom_kills as _oom_kills

    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "vmstat").write_text("pgfault 10\noom_kill 41\n")
    (proc / "self" / "cgroup").write_text("0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n")
    assert _oom_kills(str(proc), str(cgroups)) == 41  # no such cgroup here
    task = cgroups / "system.slice/slurmstepd.scope/job_7/step_0/user/task_0"
    task.mkdir(parents=True)
    (task / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n")
    assert _oom_kills(str(proc), str(cgroups)) == 1
    (proc / "self" / "cgroup").write_text("4:memory:/slurm/uid_0/job_7\n0::/\n")  # cgroup v1: the node's count
    assert _oom_kills(str(proc), str(cgroups)) == 41
    assert _oom_kills(str(tmp_path / "nowhere"), str(cgroups)) is None


def test_an_environment_too_large_for_the_kernel_names_its_largest_variable() -> None:
    """A TF_CONFIG that lists thousands of tasks passes Linux's limit on one string: execve says only
    'Argument list too long'."""
    import subprocess

    from slurm_resolver.supervise.command import cannot_run

    env = {"PATH": "/usr/bin:/bin", "TF_CONFIG": '{"cluster": {"worker": [' + '"node1234:12345", ' * 9000 + "]}}"}
    with pytest.raises(OSError) as refused:
        subprocess.Popen(["true"], env=env)
    error = cannot_run(["python"], refused.value, env)
    assert error.message.startswith("cannot run 'python': variable TF_CONFIG holds 162,0"), error.message
    assert "more than the kernel takes in one string (131,072)" in error.message  # 4 KiB pages here
    assert "resolver.to_tensorflow()" in (error.hint or "")
    argument = cannot_run(["echo", "x" * 200_000], refused.value, {"PATH": "/bin"})
    assert "argument 1 holds 200,001 bytes" in argument.message and argument.hint == "shorten argument 1 (or unset it)"
    many = {f"V{i}": "x" * 100_000 for i in range(40)}  # each fits; together past the total
    total = cannot_run(["python"], refused.value, many)
    assert "its arguments and environment (4,00" in total.message and "ulimit -s" in (total.hint or "")
    missing = cannot_run(["nosuch"], FileNotFoundError(2, "No such file or directory"), env)
    assert missing.message == "cannot run 'nosuch': No such file or directory"


def test_tasks_that_never_answered_the_bootstrap_are_recorded_once_by_the_task_that_found_it(tmp_path: Path
                                                                                            ) -> None:
    """Under run: the root, whose round waited for node2's tasks, records them as deaths heard on node2 (and
    the step's id, for run to cancel); a task that only heard it from above, or one among them, does not."""
    from slurm_resolver.errors import UnansweredError
    from slurm_resolver.outcome import bootstrapped_step
    from slurm_resolver.resolution import resolve
    from slurm_resolver.speakers import Speaker
    from slurm_resolver.supervise.records import record_unanswered

    from ..conftest import captured

    envs = captured("srun_N2_ntasks_per_node2")
    for rank, speaker in ((1, Speaker.ABOVE), (2, Speaker.TASK), (0, Speaker.TASK)):
        env = {**envs[rank], **recording(tmp_path)}
        error = UnansweredError("bootstrap: 2 of 4 tasks did not join", missing={2: "node2", 3: "node2"},
                                speaker=speaker)
        record_unanswered(resolve(env, resolves=lambda _: True), error, env)
        assert list(read_all(tmp_path)) == ([0] if rank == 0 else []), rank
    found = read_all(tmp_path)[0]
    assert found.fault.cause is Cause.LEFT and found.fault.words == "bootstrap: 2 of 4 tasks did not join"
    assert [(d.rank, d.node, d.cause, d.words) for d in found.heard] == [
        (2, "node2", Cause.SILENT, "worker:2 (rank 2) on node2 never answered in the bootstrap"),
        (3, "node2", Cause.SILENT, "worker:3 (rank 3) on node2 never answered in the bootstrap")]
    assert bootstrapped_step(tmp_path) == envs[0]["SLURM_STEP_ID"]
    record_unanswered(resolve(envs[0], resolves=lambda _: True), error, envs[0])  # outside run: nothing
