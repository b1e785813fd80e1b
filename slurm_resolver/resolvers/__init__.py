"""The resolver family: TensorFlow's contract, for Slurm, TF_CONFIG, Kubernetes and more."""

from .base import ClusterResolver, SimpleClusterResolver, UnionClusterResolver, format_master_url
from .kubernetes import KubernetesClusterResolver
from .slurm import SlurmClusterResolver
from .tfconfig import TFConfigClusterResolver

__all__ = [
    "ClusterResolver",
    "SimpleClusterResolver",
    "UnionClusterResolver",
    "TFConfigClusterResolver",
    "KubernetesClusterResolver",
    "SlurmClusterResolver",
    "format_master_url",
]
