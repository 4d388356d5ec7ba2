"""The core knows its built-in Fusion and Tower plugins by hooks only, and runs without them.

Everything Fusion and Tower add (calc-job options, a computer property and its setup flag,
a ``process show`` table, commands, profile options) comes through their hook
implementations; with ``VEGLIA_PLUGINS`` leaving them out, none of it is there and jobs
still run end to end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from veglia.entry_points import CalculationFactory, get_entry_points

ROOT = Path(__file__).resolve().parent.parent
#: Built-in plugins the core must not name (entry-point names in the veglia.plugins group).
OWNED = ("core.fusion", "core.tower")
#: Every other veglia.plugins entry point: what VEGLIA_PLUGINS loads to leave those out.
OTHERS = ",".join(ep.name for ep in get_entry_points("plugins") if ep.name not in OWNED)
WITHOUT = {"VEGLIA_PLUGINS": OTHERS}
#: Files under core/ allowed to name them, with why; keep it empty unless truly unavoidable.
ALLOWED: dict[str, str] = {}
BUILTIN_OPTIONS = {
    "resources", "max_memory_kb", "max_wallclock_seconds", "queue_name", "account", "qos",
    "custom_scheduler_commands", "prepend_text", "append_text", "environment_variables",
    "additional_retrieve_list", "parser_name", "withmpi", "right_size", "move_queue",
}  # fmt: skip


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def test_no_core_file_names_fusion_or_tower():
    named = []
    for path in sorted((ROOT / "core").rglob("*")):
        if not path.is_file() or path.suffix == ".pyc":
            continue
        relative = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"fusion|tower", line, re.IGNORECASE) and relative not in ALLOWED:
                named.append(f"{relative}:{number}: {line.strip()}")
    assert not named, "the core names a plugin; move it behind a hook:\n" + "\n".join(named)


def test_the_plugins_own_their_options_property_and_flag(run_cli):
    assert {"core.fusion", "core.tower"} <= {ep.name for ep in get_entry_points("plugins")}
    ports = CalculationFactory("core.arithmetic.add").spec().inputs["metadata"]["options"]
    assert set(ports) == BUILTIN_OPTIONS | {"fusion", "tower_run"}
    assert ports["fusion"].help == "Read the Fusion trace (defaults to the computer's)."
    assert ports["tower_run"].help == "Seqera Platform run this job is a task of."
    shown = ok(run_cli("computer", "setup", "--help")).stdout
    assert re.search(r"--fusion TEXT\s+Read the Fusion trace of jobs \(yes/no\)", shown)
    hooks = ok(run_cli("plugin", "show", "plugins", "core.fusion")).stdout
    assert "calcjob_options, collect_trace, computer_properties, process_show_tables" in hooks
    assert "calcjob_options" in ok(run_cli("plugin", "show", "plugins", "core.tower")).stdout


_JOB_WITHOUT_THEM = """
import json, sys

from veglia import engine, load_profile, orm
from veglia.entry_points import CalculationFactory
from veglia.plugin_manager import get_plugin_manager

load_profile("test")
add = CalculationFactory("core.arithmetic.add")
builder = add.get_builder()
builder.x, builder.y = orm.Int(2), orm.Int(40)
builder.metadata.computer = "gpu"
outputs, node = engine.run_get_node(builder)
try:
    add.get_builder().metadata.options.fusion = True
    refused = ""
except Exception as exc:
    refused = str(exc)
print(json.dumps({
    "plugins": sorted(name for name, _ in get_plugin_manager().list_name_plugin()),
    "sum": outputs["sum"].value,
    "finished_ok": node.is_finished_ok,
    "pk": node.pk,
    "ports": sorted(add.spec().inputs["metadata"]["options"]),
    "node_options": sorted(node.options),
    "trace_extras": sorted(node.get_attribute("trace_record")["extras"]),
    "computer_properties": orm.load_computer("gpu").properties,
    "refused": refused,
    "imported": sorted(
        name for name in sys.modules
        if name.startswith(("veglia.plugins.fusion", "veglia.plugins.tower"))
    ),
}))
"""


def test_without_fusion_and_tower_a_job_runs_end_to_end(profile, run_cli, tmp_path):
    # Made with every plugin: a computer whose jobs read Fusion traces.
    setup = ("-p", "test", "computer", "setup", "-n", "-L", "gpu", "-H", "localhost", "-T")
    setup += ("core.local", "-S", "core.direct", "-w", str(tmp_path / "work"))
    setup += ("--minimum-poll-interval", "0.1", "--safe-interval", "0")
    ok(run_cli(*setup, "--fusion", "yes"))
    ok(run_cli("-p", "test", "computer", "configure", "gpu", "-n"))

    env = {**os.environ, **WITHOUT, "VEGLIA_HOME": os.environ["VEGLIA_HOME"]}
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_JOB_WITHOUT_THEM)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen["plugins"] == sorted(OTHERS.split(","))
    assert seen["imported"] == [], "a plugin left out was imported all the same"
    assert seen["finished_ok"] and seen["sum"] == 42
    assert set(seen["ports"]) == BUILTIN_OPTIONS
    assert not {"fusion", "tower_run"} & set(seen["node_options"])
    assert "fusion" not in seen["trace_extras"]
    assert "fusion" in seen["refused"]  # an option nobody declares is refused
    assert seen["computer_properties"]["fusion"] is True  # kept for when it is back

    help_text = ok(run_cli("computer", "setup", "--help", env=WITHOUT)).stdout
    assert "--fusion" not in help_text and "--measure-usage" in help_text
    refused = run_cli(*setup[:6], "other", *setup[7:], "--fusion", "yes", env=WITHOUT)
    assert refused.exit_code == 2 and "No such option '--fusion'" in refused.stderr
    shown = ok(run_cli("-p", "test", "computer", "show", "gpu", env=WITHOUT)).stdout
    assert re.search(r"fusion\s+yes \(of a plugin not loaded\)", shown)
    process = ok(run_cli("-p", "test", "process", "show", str(seen["pk"]), env=WITHOUT)).stdout
    assert "Finished [0]" in process and "GPU (Fusion)" not in process
    assert run_cli("-p", "test", "tower", "status", env=WITHOUT).exit_code == 2

    # And with them back, all of it is there again.
    shown = ok(run_cli("-p", "test", "computer", "show", "gpu")).stdout
    assert re.search(r"fusion\s+yes\s", shown) and "not loaded" not in shown
    assert "--fusion" in ok(run_cli("computer", "setup", "--help")).stdout
