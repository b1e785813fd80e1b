"""One address rule, on a cluster whose NodeAddr is not where its node names resolve.

A second test cluster beside the session's, with ``NodeAddr=127.0.0.1`` for every node while the names
``node1``..``node4`` resolve to ``127.0.1.N`` (testcluster's ``SR_CLUSTER_NODEADDR``): Slurm reaches its
slurmds at one address, the job's tasks bind and reach each other at their names' (addresses.py). A
selection of the real-cluster tests runs on it unchanged: the bootstrap (srun, sbatch), ``slurm-resolver
stacks`` from outside the job (which asked NodeAddr, and found nobody there), ``run`` replacing a lost
node (its slurmd probed at NodeAddr) and ``submit --wait``. The whole files run on it the same way:
export ``SR_CLUSTER_NODEADDR=127.0.0.1`` (and a cluster of your own) before pytest.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ..conftest import TESTCLUSTER
from . import test_bootstrap_e2e, test_cli_e2e, test_restart_e2e, test_stacks_e2e
from .test_stacks_e2e import hung_step  # noqa: F401 (a fixture, of this module's cluster here)

pytestmark = pytest.mark.slurm

Run = Callable[..., list[dict[str, object]]]
ELSEWHERE = "127.0.0.1"


def _settings() -> dict[str, str]:
    """The variant's: beside the session's cluster, with a folder, ports and job ids of its own."""
    port = int(os.environ.get("SR_CLUSTER_PORT", "16817")) + 50
    first = int(os.environ.get("SR_CLUSTER_FIRST_JOB", "1")) + 100_000
    return {"SR_CLUSTER_DIR": os.environ.get("SR_CLUSTER_DIR", "/tmp/slurm-resolver-cluster") + "-nodeaddr",
            "SR_CLUSTER_PORT": str(port), "SR_CLUSTER_FIRST_JOB": str(first), "SR_CLUSTER_NODEADDR": ELSEWHERE}


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[dict[str, str]]:
    """This module's cluster (the session's fixture, overridden): up, its settings and SLURM_CONF in this
    process's environment for the module's tests (and the fixtures they use), stopped after them."""
    settings = _settings()
    env = {**os.environ, **settings}
    started = time.monotonic()
    up = subprocess.run([str(TESTCLUSTER), "up"], capture_output=True, text=True, timeout=600, env=env)
    if up.returncode != 0:
        pytest.fail(f"the NodeAddr test cluster did not start:\n{up.stderr[-4000:]}", pytrace=False)
    exported = subprocess.run([str(TESTCLUSTER), "env"], capture_output=True, text=True, env=env).stdout.split()[1:]
    variables = dict(item.split("=", 1) for item in exported)
    print(f"NodeAddr test cluster up in {time.monotonic() - started:.1f} s")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**settings, **variables}.items():
            patch.setenv(name, value)
        yield variables
    subprocess.Popen([str(TESTCLUSTER), "down"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                     start_new_session=True)  # not waited for: the daemons' ends take seconds, and nobody needs them


def test_the_cluster_reaches_its_slurmds_elsewhere_than_the_names(slurm_cluster: dict[str, str]) -> None:
    import socket

    from slurm_resolver import slurmctl

    assert slurmctl.node_addresses(["node1", "node2"]) == {"node1": ELSEWHERE, "node2": ELSEWHERE}
    assert socket.gethostbyname("node2") == "127.0.1.2"


def test_bootstrap_with_srun(run_tasks: Run) -> None:
    test_bootstrap_e2e.test_srun_three_nodes_six_tasks(run_tasks)


def test_bootstrap_from_an_sbatch_script(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    test_bootstrap_e2e.test_from_an_sbatch_script(slurm_cluster, tmp_path)


@pytest.mark.parametrize("hung_step", ["munge"], indirect=True)
def test_stacks_from_outside_the_job(hung_step: tuple[str, str, subprocess.Popen[str]],  # noqa: F811
                                     tmp_path: Path) -> None:
    """The issue's case: stacks asked NodeAddr (127.0.0.1), where no task listens, and gave up after 60 s."""
    started = time.monotonic()
    test_stacks_e2e.test_stacks_name_the_odd_ranks_functions_and_nodes_from_outside_and_inside(hung_step, tmp_path)
    print(f"stacks from outside and from the allocation: {time.monotonic() - started:.1f} s")


def test_run_replaces_a_lost_node(lose_node2: Callable[[bool], float], tmp_path: Path) -> None:
    """run probes the lost node's slurmd at its NodeAddr, and the spare's tasks bootstrap at their names."""
    test_restart_e2e.test_a_node_that_loses_power_is_replaced_by_the_spare_at_once(lose_node2, tmp_path, False)


def test_submit_wait(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    test_cli_e2e.test_submit_wait_runs_every_template(slurm_cluster, tmp_path, "data_parallel")
