"""sbatch templates for the common topologies, installed as package data of slurm_resolver."""
