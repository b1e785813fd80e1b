"""The one seam to Slurm's commands: records parsed, every call bounded, each failure named."""

from __future__ import annotations

import pytest

from slurm_resolver import slurmctl
from slurm_resolver.errors import AddressError, ConfigurationError


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
    assert slurmctl.node_addresses(["node1", "node3"]) == {"node1": "127.0.1.1", "node3": "127.0.1.3"}


@pytest.mark.slurm
def test_an_unknown_job_has_no_records(slurm_cluster: dict[str, str]) -> None:
    assert slurmctl.job_records("999999") == []
