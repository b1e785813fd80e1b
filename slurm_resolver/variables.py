"""Every environment variable slurm_resolver reads, in one table.

The documentation's variable reference is generated from [`VARIABLES`][slurm_resolver.variables.VARIABLES]
(``python -m slurm_resolver.variables`` prints it as Markdown).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .environment import PREFIXES

__all__ = ["Variable", "VARIABLES", "PREFIXES", "HET_PATTERN", "reference_markdown", "launch_variables"]


@dataclass(frozen=True)
class Variable:
    """One environment variable: who sets it and what slurm_resolver takes from it.

    Attributes:
        launched_with: for a variable that tells a process's place in a launch (its rank, its peers, its
            nodes, the launch's identity), which only a launcher sets: a variable that launch always sets
            with it. A process holding one of these is part of a launch: where no launcher plugin
            recognises it, it is refused naming the first missing partner, never taken for one process
            alone (``launchers/single.py``). Empty for every other variable.
    """

    name: str
    source: str
    meaning: str
    launched_with: str = ""


VARIABLES: tuple[Variable, ...] = (
    Variable("SLURM_JOB_ID", "Slurm", "job id; its presence means the process runs in a Slurm job", launched_with="SLURM_JOB_NODELIST"),
    Variable("SLURM_STEP_ID", "Slurm (srun)", "step id; present in srun steps, absent in the salloc shell and (before Slurm 26.05, which writes -5 there) the batch step: a negative id is a special step's, no srun step", launched_with="SLURM_PROCID"),
    Variable("SLURM_STEPID", "Slurm (srun)", "older name of SLURM_STEP_ID", launched_with="SLURM_PROCID"),
    Variable("SLURM_PROCID", "Slurm", "rank of the task in its step (the batch step is rank 0)", launched_with="SLURM_STEP_NODELIST"),
    Variable("SLURM_LOCALID", "Slurm (srun)", "rank of the task among the step's tasks on its node", launched_with="SLURM_PROCID"),
    Variable("SLURM_NODEID", "Slurm (srun)", "index of the task's node in the step's node list (the tree's position)", launched_with="SLURM_PROCID"),
    Variable("SLURM_GTIDS", "Slurm (srun)", "the ranks on the task's node: its node's part of a het layout to learn", launched_with="SLURM_PROCID"),
    Variable("SLURMD_NODENAME", "Slurm", "name of the node the task runs on", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_NTASKS", "Slurm (also srun's input: -n)", "number of tasks of the job (or step, inside srun); like srun's other input variables (SLURM_NPROCS, SLURM_NNODES, SLURM_NTASKS_PER_NODE) a shell may export it before srun, so alone it is no launch"),
    Variable("SLURM_STEP_NUM_TASKS", "Slurm (srun)", "number of tasks of the step", launched_with="SLURM_PROCID"),
    Variable("SLURM_STEP_NODELIST", "Slurm (srun)", "hostlist of the step's nodes, in Slurm's order", launched_with="SLURM_PROCID"),
    Variable("SLURM_JOB_NODELIST", "Slurm", "hostlist of the job's nodes, in Slurm's order", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_NODELIST", "Slurm", "older name of SLURM_JOB_NODELIST, read when that is absent", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_STEP_TASKS_PER_NODE", "Slurm (srun)", "tasks of the step on each node, compressed (4,1(x2))", launched_with="SLURM_PROCID"),
    Variable("SLURM_TASKS_PER_NODE", "Slurm", "tasks of the job on each node, compressed (4,1(x2))", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_NTASKS_PER_NODE", "Slurm", "--ntasks-per-node, when given"),
    Variable("SLURM_DISTRIBUTION", "Slurm (srun)", "task distribution: block, cyclic, plane, arbitrary"),
    Variable("SLURM_HOSTFILE", "user", "the file with each rank's node, for -m arbitrary (read where the task can; else the layout is learned from every task)"),
    Variable("SLURM_ARRAY_JOB_ID", "Slurm (--array)", "the array's job id: an element is <array job>_<task>", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_ARRAY_TASK_ID", "Slurm (--array)", "this element's index in the array (a sweep's parameters)", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_RESTART_COUNT", "Slurm (requeue)", "how many times the job was requeued (0: its first run)"),
    Variable("SLURM_RESOLVER_ATTEMPT", "slurm-resolver run", "which attempt of the step this is: 1, then one more after each restart in the allocation"),
    Variable("SLURM_RESOLVER_PROGRESS_FILE", "slurm-resolver bootstrap -- COMMAND (written)", "a file the task made for its command: the command's progress marks (b.progress(), slurm_resolver.progress()) and, once it marked, its stacks when asked"),
    Variable("SLURM_RESOLVER_OUTCOMES", "slurm-resolver run", "the directory where each task of the attempt records what its command came to"),
    Variable("SLURM_RESOLVER_FAILED_AT", "slurm-resolver run", "when the attempt before failed (seconds since the epoch): rank 0 says how long the restart took"),
    Variable("SLURM_SUBMIT_DIR", "Slurm", "where the job was submitted: the default base of checkpoint_dir()"),
    Variable("SLURM_HET_SIZE", "Slurm", "number of components of a heterogeneous job", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_PACK_SIZE", "Slurm", "older name of SLURM_HET_SIZE", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_JOB_NODELIST_HET_GROUP_<n>", "Slurm", "hostlist of component n (also *_PACK_GROUP_<n>)", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_TASKS_PER_NODE_HET_GROUP_<n>", "Slurm", "tasks per node of component n", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_NTASKS_HET_GROUP_<n>", "Slurm", "number of tasks of component n", launched_with="SLURM_JOB_ID"),
    Variable("SLURM_STEP_GPUS", "Slurm (GRES)", "GPU indices bound to the step on this node"),
    Variable("SLURM_JOB_GPUS", "Slurm (GRES)", "GPU indices bound to the job on this node"),
    Variable("GPU_DEVICE_ORDINAL", "Slurm (GRES)", "GPU indices bound to the task"),
    Variable("SLURMD_TRES_BIND", "Slurm (--gpus-per-task)", "gpu:per_task:N (gres/gpu:per_task:N in Slurm 24.11 and later) means Slurm bound each task's GPUs"),
    Variable("SLURM_GPU_BIND", "Slurm (--gpu-bind)", "single, map_gpu or mask_gpu mean Slurm bound each task's GPUs"),
    Variable("SLURM_GPUS_PER_TASK", "Slurm (--gpus-per-task)", "GPUs bound to each task"),
    Variable("SLURM_DIST_PLANESIZE", "Slurm (-m plane=N)", "plane size of the plane distribution"),
    Variable("CUDA_VISIBLE_DEVICES", "Slurm (GRES) or user", "GPUs the task may use: indices or GPU-/MIG- UUIDs"),
    Variable("OMPI_COMM_WORLD_RANK", "Open MPI mpirun", "rank; wins over SLURM_PROCID", launched_with="OMPI_COMM_WORLD_SIZE"),
    Variable("OMPI_COMM_WORLD_SIZE", "Open MPI mpirun", "number of ranks", launched_with="OMPI_COMM_WORLD_RANK"),
    Variable("OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI mpirun", "rank among the ranks on this node", launched_with="OMPI_COMM_WORLD_RANK"),
    Variable("OMPI_MCA_orte_hnp_uri", "Open MPI 4 mpirun", "read to tell what JAX's own cluster detection takes (its Open MPI cluster, first in its order): env/bootstrap --format jax", launched_with="OMPI_COMM_WORLD_RANK"),
    Variable("PMI_RANK", "MPICH/Hydra, srun --mpi=pmi2", "rank", launched_with="PMI_SIZE"),
    Variable("PMI_SIZE", "MPICH/Hydra, srun --mpi=pmi2", "number of ranks", launched_with="PMI_RANK"),
    Variable("PMI_FD", "srun --mpi=pmi2, Hydra", "a PMI server is connected: ranks can exchange through MPI", launched_with="PMI_RANK"),
    Variable("MPI_LOCALNRANKS", "MPICH/Hydra", "number of ranks on this node (copied, not yet used)", launched_with="PMI_RANK"),
    Variable("MPI_LOCALRANKID", "MPICH/Hydra", "rank among the ranks on this node", launched_with="PMI_RANK"),
    Variable("PMIX_RANK", "PMIx launchers (prterun, srun --mpi=pmix)", "rank", launched_with="PMIX_NAMESPACE"),
    Variable("PMIX_NAMESPACE", "PMIx launchers", "names the launch, part of the bootstrap's job key", launched_with="PMIX_RANK"),
    Variable("OMPI_VERSION", "Open MPI mpirun", "read to tell what JAX's own cluster detection takes (0.11.2 and later: Open MPI 5 through mpi4py): env/bootstrap --format jax", launched_with="OMPI_COMM_WORLD_RANK"),
    Variable("OMPI_MCA_ess_base_jobid", "Open MPI mpirun", "names the launch, part of the bootstrap's job key", launched_with="OMPI_COMM_WORLD_RANK"),
    Variable("KUBERNETES_SERVICE_HOST", "Kubernetes", "read to tell what JAX's own cluster detection takes (its Kubernetes cluster, counts from the API server)"),
    Variable("JAX_COORDINATOR_ADDRESS", "slurm-resolver env/bootstrap --format jax (written)", "rank 0's host and spare port: where a bare jax.distributed.initialize() meets"),
    Variable("JAX_LOCAL_DEVICE_IDS", "slurm-resolver env/bootstrap --format jax (written)", "the task's GPUs as ordinals of its process (positions in its CUDA_VISIBLE_DEVICES), where it has GPUs"),
    Variable("SLURM_RESOLVER_DEVICES", "slurm-resolver env/bootstrap --format tf, torch or shell (written)", "the task's GPUs as ordinals of its process (positions in its CUDA_VISIBLE_DEVICES), comma-separated, '' for none: the device to use, not LOCAL_RANK"),
    Variable("TF_CONFIG", "user, TensorFlow", "cluster and task as JSON, read by TFConfigClusterResolver"),
    Variable("TORCHELASTIC_RUN_ID", "torchrun (also accelerate launch)", "marks a worker of torchrun: the workers below an srun task are the launch's tasks", launched_with="RANK"),
    Variable("TORCHELASTIC_RESTART_COUNT", "torchrun", "which start of the workers this is: each restart is a launch of its own", launched_with="TORCHELASTIC_RUN_ID"),
    Variable("RANK", "torchrun, DeepSpeed's launcher (also written: env --format torch)", "a worker's rank among all workers; one that is not SLURM_PROCID, from no known launcher, is refused"),
    Variable("LOCAL_RANK", "torchrun, DeepSpeed's launcher, Lightning (also written: env --format torch)", "a worker's rank on its node; one that is not SLURM_LOCALID, from no known launcher, is refused"),
    Variable("WORLD_SIZE", "torchrun, DeepSpeed's launcher (also written: env --format torch)", "number of workers"),
    Variable("LOCAL_WORLD_SIZE", "torchrun (also written: env --format torch)", "number of workers on the node"),
    Variable("MASTER_ADDR", "torchrun, DeepSpeed's launcher (also written: env --format torch)", "read in a worker of a launcher below srun: where its run meets, part of the launch key (two runs beside each other are launches of their own)"),
    Variable("MASTER_PORT", "torchrun (--master-port), DeepSpeed's launcher (also written: env --format torch)", "read in a worker of a launcher below srun: where its run meets, part of the launch key (two runs with the run id none and another --master-port are launches of their own)"),
    Variable("CROSS_RANK", "DeepSpeed's launcher", "marks a worker of DeepSpeed's per-node launcher (the node's rank, not read)", launched_with="LOCAL_SIZE"),
    Variable("LOCAL_SIZE", "DeepSpeed's launcher", "number of workers on the node", launched_with="CROSS_RANK"),
    Variable("SLURM_RESOLVER_JOBS", "user", "override of `jobs`, e.g. ps=1,worker=3"),
    Variable("SLURM_RESOLVER_PORT_BASE", "user", "override of `port_base`"),
    Variable("SLURM_RESOLVER_EXCHANGE", "user", "exchange between the tasks: auto, mpi, rendezvous or none (see exchange=)"),
    Variable("SLURM_RESOLVER_TASK", "slurm-resolver bootstrap", "the bootstrapped task and cluster as JSON (written, then read by show --bootstrapped)"),
    Variable("SLURM_RESOLVER_TASK_TYPE", "slurm-resolver bootstrap --format shell", "the task's job name (written)"),
    Variable("SLURM_RESOLVER_TASK_ID", "slurm-resolver bootstrap --format shell", "the task's index (written)"),
    Variable("SLURM_RESOLVER_RANK", "slurm-resolver bootstrap --format shell", "the task's rank (written)"),
    Variable("SLURM_RESOLVER_WORLD_SIZE", "slurm-resolver bootstrap --format shell", "number of tasks (written)"),
    Variable("SLURM_RESOLVER_ADDRESS", "slurm-resolver bootstrap --format shell", "host:port of the task's server (written)"),
    Variable("GRPC_VERBOSITY", "slurm_resolver's servers (written when unset)", "ERROR: gRPC core's INFO lines (one per closed connection) off"),
    Variable("GRPC_ENABLE_FORK_SUPPORT", "slurm_resolver's servers (written when unset)", "false: gRPC's fork handlers off (with them, a process forked while a task's server ran died of SIGSEGV about one time in three)"),
    Variable("GRPC_DNS_RESOLVER", "slurm_resolver's servers (written when unset)", "native: gRPC resolves names with getaddrinfo, as the node does (nsswitch.conf: /etc/hosts, NIS, LDAP, DNS), not with c-ares (hosts file and DNS only, and slower); inherited by the task's children, it holds for every gRPC client there (TensorFlow's and JAX's too: no DNS SRV or TXT service configs); set it to keep another resolver"),
    Variable("TF_CPP_MIN_LOG_LEVEL", "slurm_resolver.training (written when unset)", "2 unless set: TensorFlow's native info and warning records are kept out of the training jobs' output (0 keeps them)"),
    Variable("JAX_PLATFORMS", "slurm_resolver.training.jax_job, env --format jax, bootstrap --format jax (written when unset)", "cpu where the task has no GPU of its own but sees some (CUDA_VISIBLE_DEVICES, Slurm's GPU variables or NVML): JAX would start CUDA on another task's or job's GPUs"),
    Variable("OMP_NUM_THREADS", "slurm_resolver.training.ddp (written when unset)", "1: one thread per rank on shared CPUs"),
    Variable("https_proxy", "user, site", "read (with http_proxy): where one is set, TensorFlow's and JAX's gRPC is kept off it (see grpc_proxy); the bootstrap's own calls never use a proxy"),
    Variable("http_proxy", "user, site", "read as https_proxy"),
    Variable("grpc_proxy", "slurm_resolver (written when unset: env --format tf or jax, bootstrap, tensorflow_server() and the training jobs)", "'' where an HTTP proxy is set: TensorFlow's and JAX's gRPC calls between the job's tasks go to no proxy; a user's own value (or no_grpc_proxy) wins"),
    Variable("no_grpc_proxy", "user", "read: where set, gRPC's proxy is the user's business and grpc_proxy is not written"),
    Variable("SLURM_RESOLVER_AUTH", "user", "bootstrap: auto (a secret where given, else MUNGE where munged answers, else none, said loudly), secret, munge or none"),
    Variable("SLURM_RESOLVER_SECRET", "user, the templates", "bootstrap: the job's secret (16 or more random characters): every call and answer carries a MAC (keyed BLAKE2b) made with it"),
    Variable("SLURM_RESOLVER_SECRET_FILE", "user", "bootstrap: a file (mode 0600, the job's user's) holding the job's secret, instead of SLURM_RESOLVER_SECRET"),
    Variable("SLURM_RESOLVER_MUNGE_SOCKET", "user", "munged's socket, where it is not slurm.conf's AuthInfo socket nor the default"),
    Variable("SLURM_CONF", "Slurm", "slurm.conf, read for AuthInfo=socket= (munged's socket) when authenticating"),
    Variable("SLURM_RESOLVER_RENDEZVOUS_PORTS", "user", "bootstrap: the ports node leaders try to bind, e.g. 30001,30002"),
)
"""Every variable slurm_resolver reads or writes, with who sets it and what is taken from it: the
[environment variable reference][environment-variable-reference] lists them."""


_LAUNCH = tuple(v for v in VARIABLES if v.launched_with)

HET_PATTERN = "{name}_HET_GROUP_{index}"
"""How Slurm names a het component's variable: ``SLURM_JOB_NODELIST_HET_GROUP_1``."""


def launch_variables(env: Mapping[str, str]) -> list[tuple[str, Variable]]:
    """The variables of ``env`` that only a launch sets (`Variable.launched_with`), each with its row, in the
    table's order (a row's ``<n>`` stands for any component number).

    >>> [name for name, _ in launch_variables({"SLURM_PROCID": "4", "HOME": "/", "SLURM_NTASKS_HET_GROUP_1": "2"})]
    ['SLURM_PROCID', 'SLURM_NTASKS_HET_GROUP_1']
    """
    found = []
    for row in _LAUNCH:
        if not row.name.endswith("_<n>"):
            found += [(row.name, row)] if row.name in env else []
            continue
        stem = row.name[:-3]
        found += [(name, row) for name in sorted(env) if name.startswith(stem) and name[len(stem):].isdigit()]
    return found


def _cell(text: str) -> str:
    """``text`` as one cell of a Markdown table (a bare ``|`` would end the cell)."""
    return text.replace("|", "\\|")


def reference_markdown() -> str:
    """The variable reference of the documentation, as a Markdown table."""
    rows = ["| variable | set by | what slurm_resolver takes from it | a launch sets it with |", "|---|---|---|---|"]
    rows += [f"| `{v.name}` | {_cell(v.source)} | {_cell(v.meaning)} | "
             f"{f'`{v.launched_with}`' if v.launched_with else ''} |" for v in VARIABLES]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(reference_markdown(), end="")
