"""A fake ``pynvml`` module for machines without a GPU: scenarios of devices and failures.

Install it with `install()` (``sys.modules['pynvml']`` through ``monkeypatch``, and a driver that
answers); it implements the calls slurm_resolver.nvml makes, with the library's error class. Run as
``pynvml`` itself (`as_module()`), it is the NVML of scripts/emulate-gpu-node: stdlib imports only.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - the real library's name
    pass


@dataclass
class FakeGPU:
    uuid: str
    bus_id: str
    minor: int
    name: str = "NVIDIA H100 80GB HBM3"
    mig: list[str] = field(default_factory=list)


def make(gpus: list[FakeGPU], fail_init: Exception | None = None, fail_read: bool = False) -> types.ModuleType:
    """A module object standing for pynvml with ``gpus`` in NVML's order."""
    state = {"initialised": 0, "shutdowns": 0}
    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.NVML_DEVICE_MIG_ENABLE = 1  # type: ignore[attr-defined]
    mod.state = state  # type: ignore[attr-defined]

    def init() -> None:
        if fail_init:
            raise fail_init
        state["initialised"] += 1

    def shutdown() -> None:
        state["shutdowns"] += 1

    def count() -> int:
        if fail_read:
            raise NVMLError("Unknown Error")
        return len(gpus)

    def pci(handle: FakeGPU) -> types.SimpleNamespace:
        return types.SimpleNamespace(busId=handle.bus_id.encode())

    def mig_handle(handle: FakeGPU, i: int) -> FakeGPU:
        if i >= len(handle.mig):
            raise NVMLError("Not Found")
        return FakeGPU(handle.mig[i], handle.bus_id, handle.minor)

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = count  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetUUID = lambda h: h.uuid  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMinorNumber = lambda h: h.minor  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: h.name.encode()  # type: ignore[attr-defined]
    mod.nvmlDeviceGetPciInfo = pci  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMigMode = lambda h: (1 if h.mig else 0, 1 if h.mig else 0)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle  # type: ignore[attr-defined]
    return mod


FOUR = [FakeGPU(f"GPU-0000000{i}-aaaa-bbbb-cccc-ddddeeeeffff", f"00000000:{0x17 + i:02X}:00.0", i) for i in range(4)]
# NVML enumerates by PCI bus id; here the device files' minor numbers run the other way.
REORDERED = [FakeGPU(g.uuid, g.bus_id, 3 - i) for i, g in enumerate(FOUR)]
MIG = [FakeGPU("GPU-11111111-aaaa-bbbb-cccc-ddddeeeeffff", "00000000:17:00.0", 0,
               mig=["MIG-11111111-0000-0000-0000-000000000001", "MIG-11111111-0000-0000-0000-000000000002"])]
EIGHT = [FakeGPU(f"GPU-1000000{i}-aaaa-bbbb-cccc-ddddeeeeffff", f"00000000:{0x20 + i:02X}:00.0", i) for i in range(8)]
# One NVIDIA H200 with no MIG, as the GPU node of issue 45 reported it (scripts/emulate-gpu-node).
H200 = [FakeGPU("GPU-2c5e0f3a-7d41-4b8e-9a6c-1f0e2d3c4b5a", "00000000:19:00.0", 0, name="NVIDIA H200")]


def as_module(gpus: list[FakeGPU]) -> None:
    """Make the calling module (this file run as ``pynvml``) a fake with ``gpus``: its names become the fake's."""
    globals().update({k: v for k, v in vars(make(gpus)).items() if not k.startswith("__")})


def install(monkeypatch: Any, module: types.ModuleType | list[FakeGPU] | None) -> types.ModuleType | None:
    """Make ``module`` (or a fake of those GPUs; None: no nvidia-ml-py) the ``pynvml`` that slurm_resolver.nvml
    imports, with NVIDIA's driver loaded, for one test (``monkeypatch``: pytest's)."""
    from slurm_resolver import nvml

    if isinstance(module, list):
        module = make(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(nvml, "driver_present", lambda: True)  # the fake stands for a loaded driver
    return module
