"""The seam to NVML (nvidia-ml-py, imported as ``pynvml``), loaded only when asked.

`devices()` initialises NVML, reads every GPU (index, minor number, UUID, PCI bus id,
name, MIG instances) and shuts NVML down again. Without the library or a driver it
returns None: callers fall back to what Slurm's variables say.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from .values import Value, fill

__all__: list[str] = []  # internal: no public names (docs/reference.md)

DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl")
"""Files that exist wherever NVIDIA's kernel driver is loaded (inside containers too)."""


def driver_present() -> bool:
    """Whether NVIDIA's driver is loaded: without it NVML cannot answer, and is not even loaded
    (importing and failing to initialise it costs tens of milliseconds on every CPU node)."""
    return any(os.path.exists(path) for path in DRIVER_FILES)

log = logging.getLogger("slurm_resolver")


class Device(Value):
    """One GPU as NVML sees it; ``mig`` holds its MIG instances (their UUIDs start ``MIG-``). A `Value`, not a
    dataclass: a CPU node's task asks NVML too, and a dataclass compiles its methods at import."""

    __slots__ = ("index", "minor", "uuid", "pci_bus_id", "name", "mig")
    index: int
    minor: int | None
    uuid: str
    pci_bus_id: str
    name: str
    mig: tuple[str, ...]

    def __init__(self, index: int, minor: int | None, uuid: str, pci_bus_id: str, name: str,
                 mig: tuple[str, ...] = ()) -> None:
        fill(self, index, minor, uuid, pci_bus_id, name, mig)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mig_uuids(nvml: Any, handle: Any) -> tuple[str, ...]:
    try:
        current, _ = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:
        return ()
    if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return ()
    uuids = []
    for i in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            uuids.append(_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i))))
        except nvml.NVMLError:
            continue
    return tuple(uuids)


def _device(nvml: Any, index: int) -> Device:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    try:
        minor: int | None = int(nvml.nvmlDeviceGetMinorNumber(handle))
    except nvml.NVMLError:
        minor = None
    return Device(index=index, minor=minor, uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                  pci_bus_id=_text(nvml.nvmlDeviceGetPciInfo(handle).busId),
                  name=_text(nvml.nvmlDeviceGetName(handle)), mig=_mig_uuids(nvml, handle))


def devices() -> tuple[Device, ...] | None:
    """Every GPU NVML sees, in NVML's order; None without NVML or its driver (no crash)."""
    if not driver_present():
        log.debug("NVML: no NVIDIA driver (%s)", ", ".join(DRIVER_FILES))
        return None
    try:
        import pynvml as nvml
    except ImportError:
        log.debug("NVML: nvidia-ml-py is not installed")
        return None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        log.debug("NVML: not available (%s)", exc)
        return None
    try:
        return tuple(_device(nvml, i) for i in range(nvml.nvmlDeviceGetCount()))
    except nvml.NVMLError as exc:
        log.debug("NVML: error while reading devices (%s)", exc)
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:  # pragma: no cover
            pass


def device_ids() -> tuple[str, ...] | None:
    """The ids a task uses for NVML's GPUs: MIG instances where enabled, else GPU UUIDs; None without NVML."""
    found = devices()
    return None if found is None else tuple(u for d in found for u in (d.mig or (d.uuid,)))


def uuid_by_minor(found: tuple[Device, ...]) -> dict[str, str]:
    """Slurm's GPU index (the device file's minor number) to UUID: never matched by NVML index."""
    return {str(d.minor): d.uuid for d in found if d.minor is not None}
