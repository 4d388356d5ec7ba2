"""Built-in schedulers: ``core.direct``, ``core.slurm``, ``core.pbspro``, ``core.sge``."""
