"""NVML through its one seam, with the fake library's scenarios (unit tests never read the host's GPUs)."""

from __future__ import annotations

import sys

import pytest

from slurm_resolver import SlurmClusterResolver, nvml

from .fakes import fake_pynvml as fake


def use(monkeypatch: pytest.MonkeyPatch, module: object) -> None:
    fake.install(monkeypatch, module)  # type: ignore[arg-type]


def test_without_the_driver_nvml_is_not_even_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "DRIVER_FILES", ("/nonexistent/nvidia",))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # an import would raise
    assert nvml.devices() is None and nvml.device_ids() is None


def test_several_gpus_with_init_and_shutdown_paired(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake.make(fake.FOUR)
    use(monkeypatch, module)
    found = nvml.devices()
    assert found is not None and [d.uuid for d in found] == [g.uuid for g in fake.FOUR]
    assert found[1].pci_bus_id == "00000000:18:00.0" and found[1].name == "NVIDIA H100 80GB HBM3"
    assert module.state == {"initialised": 1, "shutdowns": 1}  # type: ignore[attr-defined]


def test_order_differs_match_by_minor_number_not_index(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, fake.make(fake.REORDERED))
    found = nvml.devices()
    assert found is not None
    assert nvml.uuid_by_minor(found)["0"] == fake.FOUR[3].uuid  # Slurm's GPU 0 is NVML's index 3


def test_mig_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, fake.make(fake.MIG))
    found = nvml.devices()
    assert found is not None and found[0].mig == tuple(fake.MIG[0].mig)


def test_no_library_and_errors_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, None)  # import fails
    assert nvml.devices() is None
    use(monkeypatch, fake.make([], fail_init=fake.NVMLError_LibraryNotFound("libnvidia-ml.so.1 not found")))
    assert nvml.devices() is None
    broken = fake.make(fake.FOUR, fail_read=True)
    use(monkeypatch, broken)
    assert nvml.devices() is None and broken.state["shutdowns"] == 1  # type: ignore[attr-defined]


def test_resolver_uses_nvml_uuids_when_slurm_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, fake.make(fake.REORDERED))
    env: dict[str, str] = {}
    r = SlurmClusterResolver(environ=env)
    assert r.num_accelerators() == {"GPU": 4}
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(g.uuid for g in fake.REORDERED)  # UUIDs, never indices


def test_resolver_with_mig(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, fake.make(fake.MIG))
    env: dict[str, str] = {}
    SlurmClusterResolver(environ=env)
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(fake.MIG[0].mig)


def test_resolver_without_nvml_has_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, None)
    env: dict[str, str] = {}
    r = SlurmClusterResolver(environ=env)
    assert r.num_accelerators() == {} and "CUDA_VISIBLE_DEVICES" not in env


def test_a_unit_test_never_reads_the_hosts_nvml() -> None:
    """The guard of tests/conftest.py: on a GPU node (scripts/emulate-gpu-node) NVML stays unread."""
    assert nvml.devices() is None and SlurmClusterResolver(environ={}).num_accelerators() == {}
