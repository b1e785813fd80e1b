"""A cluster seen as TensorFlow's resolvers see one: this task, its peers, their addresses and GPUs."""

from __future__ import annotations

from slurm_resolver.resolution import resolve
from slurm_resolver.rpc.simulation.simulate import srun_environ
from slurm_resolver.rpc.view import ClusterView

CLUSTER = resolve(srun_environ(2, 2, rank=3), resolves=lambda name: True, port_base=29500)


def test_a_view_answers_a_resolvers_questions() -> None:
    view = ClusterView(CLUSTER)
    assert (view.rank, view.world_size, view.task_type, view.task_id, view.launcher) == (3, 4, "worker", 3, "srun")
    assert view.master() == f"grpc://{CLUSTER.hosts['node2']}:29501"
    assert view.cluster_spec() == CLUSTER.spec() and view.me == CLUSTER.task(3) and view.peers[0].node == "node1"
    assert view.num_accelerators() == {} and view.describe()["rank"] == 3 and view.job_key == CLUSTER.launch.key


def test_the_frameworks_spec_is_on_the_spare_ports() -> None:
    settled = CLUSTER.with_ports([40000, 40001, 40002, 40003], [41000, 41001, 41002, 41003])
    assert ClusterView(settled).framework_spec().as_dict()["worker"][3].endswith(":41003")
