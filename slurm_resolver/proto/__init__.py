"""Protocol buffers of slurm_resolver, generated from the .proto files beside them (scripts/generate-protos)."""
