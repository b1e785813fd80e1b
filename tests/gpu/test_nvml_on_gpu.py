"""NVML on a real GPU: what it reads is what ``nvidia-smi`` says, MIG where a GPU has it, and what it costs a task."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys

import pytest

from slurm_resolver import SlurmClusterResolver, nvml

from .conftest import probe, srun_task


def smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, check=True, timeout=60).stdout


def test_nvml_reads_what_nvidia_smi_says() -> None:
    rows = [[field.strip() for field in line.split(",")] for line in
            smi("--query-gpu=index,uuid,pci.bus_id,name", "--format=csv,noheader").splitlines() if line.strip()]
    found = nvml.devices()
    assert found is not None and len(found) == len(rows)
    for device, (index, uuid, bus, name) in zip(found, rows):
        read = (device.index, device.uuid, device.pci_bus_id.upper(), device.name)
        assert read == (int(index), uuid, bus.upper(), name)
    if not any(d.mig for d in found):
        assert nvml.device_ids() == tuple(d.uuid for d in found)


def test_mig_instances_are_what_a_task_is_given_where_mig_is_on() -> None:
    found = nvml.devices() or ()
    if not any(d.mig for d in found):
        pytest.skip("no GPU here has MIG enabled (`nvidia-smi -i 0 -mig 1` enables it, as root, on an A100/H100/H200)")
    listed = re.findall(r"\(UUID: (MIG-[^)]+)\)", smi("-L"))
    assert [u for d in found for u in d.mig] == listed
    env = srun_task(0, 1)
    SlurmClusterResolver(environ=env, check_port=False)
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(listed)  # MIG UUIDs, never indices
    seen = probe(f"import os; os.environ['CUDA_VISIBLE_DEVICES'] = {env['CUDA_VISIBLE_DEVICES']!r}; import torch; "
                 "print(torch.cuda.device_count())") if _has("torch") else "1"
    assert seen == "1", seen  # CUDA gives one process one MIG instance: the first listed


def _has(module: str) -> bool:
    return probe(f"import importlib.util; print(importlib.util.find_spec({module!r}) is not None)") == "True"


COST = """
import json, time
start = time.perf_counter()
from slurm_resolver import nvml
ids = nvml.device_ids()
first = time.perf_counter() - start
start = time.perf_counter()
nvml.device_ids()
print(json.dumps({"first": first, "again": time.perf_counter() - start, "gpus": len(ids or ())}))
"""


def test_nvmls_cost_a_task(record_property: pytest.RecordProperty) -> None:
    """What a task pays where no variable names its GPUs: NVML loaded, initialised, read and shut down, once in
    a fresh process (each task of a step is one). Printed (``-rP``) for docs/testing.md."""
    runs = [json.loads(subprocess.run([sys.executable, "-c", COST], capture_output=True, text=True, check=True,
                                      timeout=120).stdout) for _ in range(5)]
    first, again = statistics.median(r["first"] for r in runs), statistics.median(r["again"] for r in runs)
    record_property("nvml_first_s", first)
    record_property("nvml_again_s", again)
    print(f"NVML's cost a task: {first * 1000:.1f} ms the first read in a fresh process (import, init, "
          f"{runs[0]['gpus']} GPUs, shutdown), {again * 1000:.1f} ms a read after; median of 5")
    assert runs[0]["gpus"] >= 1 and first < 2.0, runs
