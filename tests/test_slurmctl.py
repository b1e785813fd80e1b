"""The one seam to Slurm's commands: records parsed, every call bounded, each failure named."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from slurm_resolver import slurmctl
from slurm_resolver.errors import AddressError, ConfigurationError, ResolutionError


@pytest.mark.parametrize(("text", "records"), [
    ("", []),
    ("NodeName=node1 NodeAddr=10.0.0.1\n\nNodeName=node2 NodeAddr=10.0.0.2\n",
     [{"NodeName": "node1", "NodeAddr": "10.0.0.1"}, {"NodeName": "node2", "NodeAddr": "10.0.0.2"}]),
    ("JobId=5 JobState=RUNNING Restarts=1 Reason=None",
     [{"JobId": "5", "JobState": "RUNNING", "Restarts": "1", "Reason": "None"}]),
    ("Comment=a=b=c", [{"Comment": "a=b=c"}]),
    ("NodeName=node3 State=DOWN* Reason=Not responding [slurm@2026-11-23T01:02:03] OS=Linux 6.1.0-9 #1 SMP",
     [{"NodeName": "node3", "State": "DOWN*", "Reason": "Not responding [slurm@2026-11-23T01:02:03]",
       "OS": "Linux 6.1.0-9 #1 SMP"}]),
    ("JobId=7 JobName=my run  Socks/Node=* NtasksPerN:B:S:C=0:0:*:* TRES=cpu=4,node=1  ",
     [{"JobId": "7", "JobName": "my run", "Socks/Node": "*", "NtasksPerN:B:S:C": "0:0:*:*", "TRES": "cpu=4,node=1"}]),
    ("words before the first key NodeName=n1", [{"NodeName": "n1"}]),
])
def test_records_are_one_dict_per_line(text: str, records: list[dict[str, str]]) -> None:
    assert slurmctl.parse_records(text) == records


def test_a_command_that_does_not_answer_is_named_with_its_timeout() -> None:
    with pytest.raises(ConfigurationError, match=r"sleep 5 did not answer within 0.2 s"):
        slurmctl.run(["sleep", "5"], 0.2)


def test_a_missing_command_says_where_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigurationError, match="scontrol is not on PATH"):
        slurmctl.command("scontrol")
    with pytest.raises(ConfigurationError, match="cannot requeue itself") as info:
        slurmctl.requeue("42")
    assert "scontrol requeue 42" in (info.value.hint or "")
    with pytest.raises(AddressError, match=r"node names node\[1-2\] do not resolve, and scontrol is not on PATH"):
        slurmctl.node_addresses(["node1", "node2"])


@pytest.mark.slurm
def test_node_addresses_come_from_slurm_in_one_call(slurm_cluster: dict[str, str]) -> None:
    """Each node's NodeAddr as slurm.conf sets it (127.0.1.N; one address for all where SR_CLUSTER_NODEADDR is set)."""
    conf = Path(slurm_cluster["SLURM_CONF"]).read_text()
    written = dict(re.findall(r"(?m)^NodeName=(\S+) NodeAddr=(\S+)", conf))
    assert slurmctl.node_addresses(["node1", "node3"]) == {"node1": written["node1"], "node3": written["node3"]}
    assert written["node3"] in ("127.0.1.3", os.environ.get("SR_CLUSTER_NODEADDR"))


@pytest.mark.slurm
def test_an_unknown_job_has_no_records(slurm_cluster: dict[str, str]) -> None:
    assert slurmctl.job_records("999999") == []


@pytest.mark.slurm
def test_a_controller_that_does_not_answer_is_no_answer_about_the_job(
        slurm_cluster: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster's slurm.conf with slurmctld's port moved to one where nothing listens."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    conf = Path(slurm_cluster["SLURM_CONF"]).read_text()
    moved = re.sub(r"(?m)^SlurmctldPort=.*$", f"SlurmctldPort={port}", conf)
    moved = re.sub(r"(?m)^(MessageTimeout|TCPTimeout)=.*\n", "", moved) + "MessageTimeout=2\nTCPTimeout=1\n"
    (tmp_path / "slurm.conf").write_text(moved)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    with pytest.raises(ResolutionError, match=r"scontrol show job 1 failed: .*(contact|connect)") as info:
        slurmctl.job_records("1")
    assert "scontrol ping" in (info.value.hint or "")


@pytest.mark.parametrize(("state", "reason", "why"), [
    ("IDLE", "", None), ("ALLOCATED", "", None), ("MIXED", "", None), ("IDLE+RESERVED", "", None),
    ("DOWN", "none", "Slurm marks it DOWN"),
    ("DOWN*", "Not responding [slurm@2026-11-23T01:02:03]", "Slurm marks it DOWN* (Not responding)"),
    ("ALLOCATED*", "", "Slurm marks it ALLOCATED*"),
    ("IDLE+DRAIN", "bad GPU [root@2026]", "Slurm marks it IDLE+DRAIN (bad GPU)"),
    ("ALLOCATED+DRAIN", "", "Slurm marks it ALLOCATED+DRAIN"),
    ("MIXED+FAIL", "", "Slurm marks it MIXED+FAIL"),
    ("IDLE+POWERED_DOWN", "", "Slurm marks it IDLE+POWERED_DOWN"),
    ("ALLOCATED+NOT_RESPONDING", "", "Slurm marks it ALLOCATED+NOT_RESPONDING"),
])
def test_slurms_view_of_a_node_says_whether_it_can_run_tasks(state: str, reason: str, why: str | None) -> None:
    record = {"NodeName": "n1", "State": state, **({"Reason": reason} if reason else {})}
    assert slurmctl.unhealthy(record) == why


def test_a_node_whose_slurmd_does_not_answer_is_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A living slurmd reads the probe's empty message and closes; a frozen one (SIGSTOP, a node without
    power behind a switch) leaves the connection its kernel completed unanswered; a dead one refuses it."""
    import subprocess
    import threading

    living = socket.socket()
    living.bind(("127.0.0.1", 0))
    living.listen()

    def serve() -> None:  # as slurmd: read the message, find it empty, close
        while True:
            try:
                connection, _ = living.accept()
            except OSError:
                return
            with connection:
                connection.recv(4096)

    threading.Thread(target=serve, daemon=True).start()
    frozen = socket.socket()
    frozen.bind(("127.0.0.1", 0))
    frozen.listen()  # its kernel completes connections; nobody accepts them
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: a connection is refused
    text = "\n".join(f"NodeName=n{i} NodeAddr=127.0.0.1 Port={s.getsockname()[1]} State={state}"
                     for i, (s, state) in enumerate([(living, "ALLOCATED"), (closed, "ALLOCATED"),
                                                     (living, "DOWN*"), (frozen, "ALLOCATED")], 1))
    monkeypatch.setattr(slurmctl, "run", lambda args, timeout: subprocess.CompletedProcess(args, 0, text, ""))
    bad = slurmctl.node_health(["n1", "n2", "n3", "n4", "n5"], probe=["n1", "n2", "n4"], timeout=1.0)
    assert sorted(bad) == ["n2", "n3", "n4", "n5"]
    assert bad["n2"].startswith(f"its slurmd does not answer at 127.0.0.1:{closed.getsockname()[1]} (")
    assert bad["n4"] == f"its slurmd does not answer at 127.0.0.1:{frozen.getsockname()[1]} (nothing within 1 s)"
    assert bad["n3"] == "Slurm marks it DOWN*" and bad["n5"] == "Slurm does not know it"
    monkeypatch.setattr(slurmctl, "run", lambda args, timeout: subprocess.CompletedProcess(args, 1, "", "down"))
    assert slurmctl.node_health(["n1"], probe=["n1"]) == {}  # scontrol failed: no node is left behind for it
    for s in (living, frozen, closed):
        s.close()


def test_a_step_is_cancelled_and_a_refusal_said_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    said: list[list[str]] = []

    def scancel(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        said.append(list(args))
        return subprocess.CompletedProcess(args, 0 if args[-1] == "7.1" else 1, "", "Invalid job id specified")

    monkeypatch.setattr(slurmctl, "run", scancel)
    assert slurmctl.cancel_step("7.1") is None and said == [["scancel", "--quiet", "7.1"]]
    assert slurmctl.cancel_step("7.2") == "Invalid job id specified"
    monkeypatch.undo()
    monkeypatch.setattr(slurmctl.shutil, "which", lambda name: None)
    assert "scancel is not on PATH" in (slurmctl.cancel_step("7.1") or "")


@pytest.mark.slurm
def test_every_node_of_the_test_cluster_is_healthy(slurm_cluster: dict[str, str]) -> None:
    assert slurmctl.node_health(["node1", "node2", "node3", "node4"], probe=["node1", "node4"]) == {}
