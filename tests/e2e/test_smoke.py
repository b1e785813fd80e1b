"""The test cluster runs real work: srun across nodes, a waited sbatch job, mpirun in salloc."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..conftest import sbatch_wait

pytestmark = pytest.mark.slurm


def sh(*args: str, timeout: float = 120) -> str:
    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(args)}: {out.stderr}"
    return out.stdout


def test_nodes_are_idle_with_gpus(slurm_cluster: dict[str, str]) -> None:
    lines = sh("sinfo", "-h", "-N", "-o", "%N %G").split()
    assert {"node1", "node2", "node3", "node4"} <= set(lines) and "gpu:4" in lines


def test_srun_spans_three_nodes(slurm_cluster: dict[str, str]) -> None:
    out = sh("srun", "-N3", "-n6", "bash", "-c", "echo $SLURM_PROCID $SLURMD_NODENAME")
    nodes = [l.split()[1] for l in sorted(out.split("\n")[:-1], key=lambda l: int(l.split()[0]))]
    assert len(nodes) == 6 and len(set(nodes)) == 3 and len(set(nodes[:4])) == 1


def test_sbatch_job_is_waited_for(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsrun -N2 -n2 bash -c 'echo task $SLURM_PROCID on $SLURMD_NODENAME'\n")
    sbatch_wait(script, "-N2", "-n2", "-o", str(tmp_path / "out"))
    lines = sorted((tmp_path / "out").read_text().split("\n")[:-1])
    assert [l.split()[1] for l in lines] == ["0", "1"] and lines[0].split()[-1] != lines[1].split()[-1]


def test_mpirun_inside_salloc(slurm_cluster: dict[str, str]) -> None:
    out = sh("salloc", "-N2", "-n4", "mpirun", "--allow-run-as-root", "bash", "-c",
             "echo $OMPI_COMM_WORLD_RANK $SLURMD_NODENAME")
    ranks = sorted(l.split() for l in out.split("\n") if l and l[0].isdigit())
    assert [r[0] for r in ranks] == ["0", "1", "2", "3"] and len({r[1] for r in ranks}) == 2


@pytest.mark.parametrize("mpi", ["pmix", "pmi2"])
def test_srun_mpi_plugins_work(slurm_cluster: dict[str, str], mpi: str) -> None:
    out = sh("srun", f"--mpi={mpi}", "-N2", "-n3", "bash", "-c", "echo ${PMIX_RANK:-$PMI_RANK}")
    assert sorted(out.split()) == ["0", "1", "2"]


def test_gres_gpus_are_bound(slurm_cluster: dict[str, str]) -> None:
    out = sh("srun", "-N1", "-n2", "--gpus-per-task=1", "bash", "-c", "echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES")
    assert sorted(out.split("\n")[:-1]) == ["0 0", "1 1"]
