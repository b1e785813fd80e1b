"""One TensorFlow task for the interop tests: ``python tf_task.py ROLE CLUSTER_JSON INDEX``.

Roles: ``server`` (a tf.distribute.Server from our ClusterSpec), ``mwms`` (a worker of
MultiWorkerMirroredStrategy from our resolver), ``chief`` (ParameterServerStrategy with a
ClusterCoordinator, from our resolver). Prints one JSON line with what it saw.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    import tensorflow as tf

    from slurm_resolver import ClusterSpec, SimpleClusterResolver

    role, cluster, index = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    spec = ClusterSpec(cluster)
    if role == "server":
        job = sys.argv[4]
        server = tf.distribute.Server(spec.as_cluster_def(), job_name=job, task_index=index, protocol="grpc")
        print(json.dumps({"target": server.target.decode() if isinstance(server.target, bytes) else server.target}),
              flush=True)
        server.join()
    elif role == "mwms":
        resolver = SimpleClusterResolver(spec, task_type="worker", task_id=index, rpc_layer="grpc")
        strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver.to_tensorflow())
        total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(float(index + 1))),
                                axis=None)
        print(json.dumps({"workers": strategy.extended._num_workers, "sum": float(total)}), flush=True)
    elif role == "chief":
        resolver = SimpleClusterResolver(spec, task_type="chief", task_id=0, rpc_layer="grpc")
        strategy = tf.distribute.experimental.ParameterServerStrategy(resolver.to_tensorflow())
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            variable = tf.Variable(0.0)

        @tf.function
        def step() -> tf.Tensor:
            variable.assign_add(2.5)
            return variable.read_value()

        coordinator.schedule(step)
        coordinator.join()
        print(json.dumps({"device": variable.device, "value": float(variable.numpy())}), flush=True)


if __name__ == "__main__":
    main()
