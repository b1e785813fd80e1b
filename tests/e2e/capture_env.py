#!/usr/bin/env python3
"""Write this task's launcher variables as one JSON line (used to capture tests/data/env).

With a directory argument the line goes to DIR/<host>-<pid>.json (task output through srun
interleaves long lines); without, to standard output.

Only variables that slurm_resolver reads are kept: SLURM_*, OMPI_COMM_WORLD_*, PMI_*,
PMIX_RANK/PMIX_SIZE-like names, CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, the variables of
launchers below srun (torchrun's RANK, LOCAL_WORLD_SIZE...), and the host name.
"""
import json
import os
import socket
import sys

PREFIXES = ("SLURM", "OMPI_COMM_WORLD_", "PMI_", "PMIX_RANK", "PMIX_NAMESPACE", "MPI_LOCAL",
            "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES",
            # launchers below srun (torchrun, DeepSpeed): their workers' places
            "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "RANK", "LOCAL_RANK", "WORLD_SIZE",
            "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "CROSS_RANK", "CROSS_SIZE", "LOCAL_SIZE")
SKIP = ("SLURM_CONF", "SLURM_SRUN_COMM_HOST", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_TOPOLOGY_ADDR",
        "PMI_FD", "SLURM_STEP_LAUNCHER_PORT", "SLURM_SRUN_COMM_PORT", "SLURM_TASK_PID")


def main() -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith(PREFIXES) and k not in SKIP}
    env["_HOSTNAME"] = socket.gethostname()
    line = json.dumps(env, sort_keys=True)
    if len(sys.argv) > 1:
        with open(os.path.join(sys.argv[1], f"{socket.gethostname()}-{os.getpid()}.json"), "w") as f:
            f.write(line + "\n")
    else:
        print(line, flush=True)


if __name__ == "__main__":
    main()
