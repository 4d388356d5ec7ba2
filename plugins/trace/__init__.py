"""The built-in ``core.trace`` plugin: a job's trace, sampled beside it on the compute node."""
