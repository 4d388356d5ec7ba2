"""The Fusion plugin's hook implementations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veglia.plugin_api import hookimpl

if TYPE_CHECKING:
    # Lazy: every process loads this hook module; the ORM only when asked.
    from veglia.plugin_api import CalcJobOption, ComputerProperty


@hookimpl
def calcjob_options() -> list[CalcJobOption]:
    """``metadata.options.fusion``: read this job's trace (else its computer's property)."""
    from veglia.plugin_api import CalcJobOption  # the engine only when jobs are

    return [CalcJobOption("fusion", bool, "Read the Fusion trace (defaults to the computer's).")]


@hookimpl
def computer_properties() -> list[ComputerProperty]:
    """The ``fusion`` property (``veglia computer setup --fusion yes``): read every job's."""
    # Lazy: every process loads this hook module; the ORM only when asked.
    from veglia.plugin_api import ComputerProperty

    return [ComputerProperty("fusion", False, "Read the Fusion trace of jobs (yes/no).")]


@hookimpl(tryfirst=True)
def collect_trace(node: Any, transport: Any, record: Any, computer: Any) -> None:
    """Put the Fusion trace's ``gpu``, ``proc`` and ``cgroup`` blocks on the record."""
    # Lazy: every process loads this hook module (`veglia --help` too); the trace reader
    # brings the ORM and SQLAlchemy.
    from veglia.plugins.fusion.trace_file import TraceUnusable, fusion_enabled, read_trace

    if transport is None or not fusion_enabled(node, computer):
        return
    try:
        blocks = read_trace(transport)
    except TraceUnusable as exc:
        node.add_log("DEBUG", f"fusion: no GPU metrics: {exc}")
        return
    record.gpu_metrics = blocks.get("gpu")
    record.extras["fusion"] = {key: blocks.get(key) for key in ("proc", "cgroup")}
    if isinstance(blocks.get("proc"), dict) and "peak_rss" in measured_usage(
        record, blocks["proc"]
    ):
        record.measured_by = "fusion"
    if record.gpu_metrics is None:
        node.add_log("DEBUG", "fusion: the trace has no gpu block (a CPU-only task)")


def measured_usage(record: Any, proc: dict[str, Any]) -> set[str]:
    """What Fusion measured replaces what the engine guessed; junk values are skipped.
    Returns the names of the record's fields it set."""
    # Lazy: every process loads this hook module; the engine only for a trace.
    from veglia.plugin_api import apply_proc_block

    return apply_proc_block(record, proc)


#: The GPU block's known fields in ``veglia process show``, in order, with their labels.
GPU_FIELDS = (
    ("name", "GPU"), ("driver", "driver"), ("mem", "memory (MiB)"), ("pct", "utilisation %"),
    ("peak", "peak utilisation %"), ("pct_mem", "memory used %"), ("peak_mem", "peak memory %"),
    ("avg_mem", "mean memory used (MiB)"), ("peak_mem_used", "peak memory used (MiB)"),
    ("avg_mem_bw_util", "mean memory bandwidth %"), ("peak_mem_bw_util", "peak memory bandwidth %"),
    ("active_time", "active time (ms)"),
)  # fmt: skip


@hookimpl
def process_show_tables(node: Any) -> list[tuple[tuple[str, ...], list[tuple[Any, ...]]]]:
    """The GPU block: the known fields in order, then any the schema added since."""
    gpu = node.get_attribute("gpu_metrics")
    if not gpu:
        return []
    known = {key for key, _ in GPU_FIELDS}
    rows = [(label, gpu[key]) for key, label in GPU_FIELDS if key in gpu]
    rows += [(key, value) for key, value in gpu.items() if key not in known]
    return [(("GPU (Fusion)", "Value"), rows)]
