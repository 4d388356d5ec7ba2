"""The built-in ``core.guard`` plugin: the monitors' guards, run beside the job.

When a job's monitors have guards (``veglia.plugin_api.Guard``) and its computer's
``guards`` property is on, the job script starts a watcher beside the commands (the
``job_script_wrap`` hook, in ``hooks``). Every ``guard_interval`` seconds it reads the
daemon's heartbeat file (``guard_heartbeat``) and runs the guards that act always, or all of
them while the daemon has not been heard from for ``guard_away_after`` seconds. A guard that
says stop gets ``_veglia_guard.json`` written and the job stopped. See docs/monitors.md,
"Guards".
"""
