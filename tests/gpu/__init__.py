"""Tests on a real NVIDIA GPU (marked ``gpu``): NVML against ``nvidia-smi``, the getting-started pages' training on
the GPU, JAX's processes on one GPU, torch's NCCL on the device the task is given, MIG, NVML's cost a task.

Each is skipped, with the reason, where no NVIDIA driver answers; docs/testing.md says how to run them on a GPU node.
They read the host's GPUs: the guard that keeps every other test off them (tests/hosts/unit.py) is off here.
"""
