"""The built-in ``core.trace`` plugin: a job's trace, sampled beside it on the compute node.

The job script starts ``sampler.sh``'s sampler before the job's commands (the
``job_script_wrap`` hook, in ``hooks``); it walks the job's process tree, reads its cgroup and,
where ``nvidia-smi`` is on the compute node, its GPUs, and rewrites ``_veglia_trace.json``
(blocks ``proc``, ``cgroup``, ``gpu`` and ``sampler``, the names and units of Fusion's
``.fusion/trace.json``) and appends to ``_veglia_trace.series`` in the work directory while the
job runs, then once more when it ends. ``collect_trace`` puts the blocks on the trace record
(Fusion's own, when it ran, win). The computer properties ``trace`` (yes/no) and
``trace_interval`` (seconds) turn it off or space the samples. ``show`` draws the trace in
``veglia process show``. See docs/trace.md.
"""
