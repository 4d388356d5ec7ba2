"""``veglia process dump PK``: a process's inputs, outputs and files in a folder, to read or
rerun by hand (``verdi process dump``)."""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime, timezone
from itertools import chain, count
from pathlib import Path
from typing import Any

import click

from veglia.cli.completion import complete_process_pks
from veglia.cli.node_args import load_process
from veglia.cli.output import echo_success, echo_warning
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import InvalidOptionError
from veglia.orm import Bool, Dict, Float, FolderData, Int, List, SinglefileData, Str
from veglia.orm.nodes import Node, as_utc
from veglia.orm.process_nodes import CalcJobNode, ProcessNode
from veglia.relative_paths import checked_relative

__all__ = ["METADATA", "DumpedFolders", "dump_process", "process_dump_command"]

#: What veglia knows of the dumped process; also how ``--overwrite`` recognises a dump.
METADATA = "veglia_process.json"


def safe_name(text: str) -> str:
    """``text`` as one folder or file name: letters, digits, ``.``, ``_``, ``+``, ``-``."""
    return re.sub(r"[^\w.+-]+", "_", text).strip("._") or "node"


def short_type(node: ProcessNode) -> str:
    """``core.shell``; ``CountedShell`` for ``pipeline_workflows:CountedShell``."""
    return (node.process_type or node.node_type).rsplit(":", 1)[-1]


def _value(node: Node) -> Any:
    if isinstance(node, Int | Float | Str | Bool):
        return node.value
    if isinstance(node, Dict):
        return node.get_dict()
    if isinstance(node, List):
        return node.get_list()
    return node.attributes or None


def _write_files(node: Node, folder: Path) -> list[str]:
    """The node's stored files under ``folder``, as their relative paths."""
    written = []
    for record in node.list_objects():
        path = checked_relative(record.path)
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(node.get_object_content(record.path))
        written.append(path)
    return written


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)
    path.write_text(text + "\n")


def _distinct_name(label: str, pk: int, taken: set[str]) -> str:
    """A name for ``label`` whose folder and ``.json`` file no earlier label of the folder
    uses: two labels may clean to one name (``a b`` and ``a_b``), or differ only in case."""
    base = safe_name(label)
    candidates = chain([base, f"{base}-{pk}"], (f"{base}-{pk}-{n}" for n in count(2)))
    for name in candidates:  # ends: ``taken`` is finite
        uses = {name.casefold(), f"{name}.json".casefold()}
        if not uses & taken:
            taken |= uses
            return name
    raise AssertionError("unreachable")


def _dump_links(links: list[tuple[str, Node]], folder: Path, root: Path) -> dict[str, Any]:
    """Each linked data node: a value in ``<label>.json``, files in ``<label>/``."""
    found: dict[str, Any] = {}
    taken: set[str] = set()
    for label, node in links:
        entry: dict[str, Any] = {"pk": node.pk, "uuid": node.uuid, "type": type(node).__name__}
        name = _distinct_name(label, node.pk, taken)
        if node.list_objects():
            files = _write_files(node, folder / name)
            entry["files"] = [str((folder / name / f).relative_to(root)) for f in files]
        if not isinstance(node, SinglefileData | FolderData):
            value = _value(node)
            if value is not None:
                entry["value"] = value
                _write_json(folder / f"{name}.json", value)
                entry["path"] = str((folder / f"{name}.json").relative_to(root))
        found[label] = entry
    return found


def _time(value: datetime | None) -> str | None:
    return as_utc(value).isoformat() if value else None


def _readme(node: ProcessNode, meta: dict[str, Any]) -> str:
    state = meta["process_state"] or "unknown"
    if meta["exit_status"] is not None:
        state += f", exit status {meta['exit_status']}"
    if meta["exit_message"]:
        state += f": {meta['exit_message']}"
    title = f"{short_type(node)} {node.pk}" + (f" ({node.label})" if node.label else "")
    lines = [
        f"# Process {title}",
        "",
        f"{meta['process_type']}, {state}. Written by `veglia process dump {node.pk}` on "
        f"{meta['dumped']}.",
        "",
        f"- `{METADATA}`: what veglia knows of it (state, exit status, computer, job id, work "
        "dir) and of each input and output: pk, type, value or files.",
        "- `inputs/`: its input nodes: a value in `<label>.json`, files in `<label>/`.",
        "- `outputs/`: its output nodes, the same way.",
    ]
    if isinstance(node, CalcJobNode):
        lines += [
            "- `job/`: the files veglia wrote into the job's work dir: the submit script "
            "`_veglia_submit.sh` and the plugin's input files (files copied from input nodes "
            "are in `inputs/<label>/`).",
            "- `retrieved/`: the files brought back from the work dir after the job ran.",
            "",
            "## Run it again by hand",
            "",
            f"The job ran on `{meta.get('computer')}` in `{meta.get('remote_workdir')}` "
            f"(`veglia calcjob gotocomputer {node.pk}` opens a shell there, while it exists). "
            "To run it elsewhere, copy `job/` and the input files the submit script uses into "
            "an empty folder, then run the script there:",
            "",
            "    mkdir run && cp -r job/. run/ && cd run && bash _veglia_submit.sh",
        ]
    if meta["called"]:
        lines.append("")
        lines.append("## Called processes, in the order they were called")
        lines.append("")
        for child in meta["called"]:
            label = f" ({child['label']})" if child["label"] else ""
            where = f"`{child['folder']}/`" if child["folder"] else "not again"
            lines.append(
                f"- {where}: {child['process_type']} {child['pk']}{label}, "
                f"{child['process_state']}"
                + (f" [{child['exit_status']}]" if child["exit_status"] is not None else "")
                + (f", dumped already in `{child['dumped_in']}/`" if "dumped_in" in child else "")
            )
    return "\n".join(lines) + "\n"


class DumpedFolders(dict[int, Path]):
    """The folder each process of one dump went to, by pk. A process met a second time
    (a call cycle, which only a forged archive or a direct database write can make) is
    not written again: it is listed in :attr:`repeats`, as ``caller pk -> called pk``."""

    def __init__(self) -> None:
        super().__init__()
        self.repeats: list[str] = []


def dump_process(
    node: ProcessNode, folder: Path, dumped: DumpedFolders | None = None
) -> dict[str, Any]:
    """Write process ``node`` to ``folder`` (made), its called processes in sub-folders;
    return its metadata, as written to :data:`METADATA`. ``dumped`` holds the processes
    written so far by the same dump."""
    dumped = DumpedFolders() if dumped is None else dumped
    dumped[node.pk] = folder
    folder.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "pk": node.pk,
        "uuid": node.uuid,
        "node_type": node.node_type,
        "process_type": node.process_type,
        "label": node.label,
        "description": node.description,
        "process_state": node.process_state,
        "exit_status": node.exit_status,
        "exit_message": node.exit_message,
        "created": _time(node.ctime),
        "modified": _time(node.mtime),
        "dumped": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    outputs = node.outputs.items()
    if isinstance(node, CalcJobNode):
        meta.update(
            computer=node.computer_label,
            job_id=node.job_id,
            remote_workdir=node.remote_workdir,
            options=node.options,
            job_files=[f"job/{path}" for path in _write_files(node, folder / "job")],
        )
        retrieved = dict(outputs).get("retrieved")
        if retrieved is not None:
            files = _write_files(retrieved, folder / "retrieved")
            meta["retrieved"] = [f"retrieved/{path}" for path in files]
            outputs = [(label, n) for label, n in outputs if label != "retrieved"]
    meta["inputs"] = _dump_links(node.inputs.items(), folder / "inputs", folder)
    meta["outputs"] = _dump_links(outputs, folder / "outputs", folder)
    meta["called"] = []
    for index, child in enumerate(node.called, start=1):
        entry: dict[str, Any] = {
            "folder": f"{index:02d}-{safe_name(child.label or short_type(child))}-{child.pk}",
            "pk": child.pk,
            "process_type": child.process_type,
            "label": child.label,
            "process_state": child.process_state,
            "exit_status": child.exit_status,
        }
        if child.pk in dumped:
            entry["folder"] = None
            entry["dumped_in"] = os.path.relpath(dumped[child.pk], folder)
            dumped.repeats.append(f"{node.pk} -> {child.pk}")
        else:
            dump_process(child, folder / entry["folder"], dumped)
        meta["called"].append(entry)
    _write_json(folder / METADATA, meta)
    (folder / "README.md").write_text(_readme(node, meta))
    return meta


def _make_room(folder: Path, overwrite: bool) -> None:
    """Refuse a non-empty ``folder``; with ``overwrite``, delete it if it holds a dump."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InvalidOptionError(f"{folder} is a file, not a folder; choose another with -o.")
    if not any(folder.iterdir()):
        return
    if not overwrite:
        raise InvalidOptionError(
            f"The folder {folder} is not empty; choose another with -o, or replace it with "
            "--overwrite."
        )
    if not (folder / METADATA).is_file():
        raise InvalidOptionError(
            f"The folder {folder} is not empty and holds no earlier dump (no {METADATA}); "
            "--overwrite replaces only a dump. Choose another folder with -o."
        )
    shutil.rmtree(folder)


@click.command("dump")
@click.argument("identifier", metavar="PK", shell_complete=complete_process_pks)
@click.option(
    "-o",
    "--output",
    "folder",
    type=click.Path(path_type=Path),
    help="The folder to write (default: ./dump-<process type>-<PK>).",
)
@click.option("--overwrite", is_flag=True, help="Replace the folder when it holds an earlier dump.")
@pass_state
def process_dump_command(
    state: CliState, identifier: str, folder: Path | None, overwrite: bool
) -> None:
    """Write process PK to a folder: its inputs, outputs, a calc job's submit script and
    retrieved files, and (in sub-folders) each process a workflow called, with a README."""
    state.profile  # noqa: B018 -- load the chosen profile
    node = load_process(identifier)
    folder = folder or Path(f"dump-{safe_name(short_type(node))}-{node.pk}")
    _make_room(folder, overwrite)
    dumped = DumpedFolders()
    meta = dump_process(node, folder, dumped)
    if dumped.repeats:
        echo_warning(
            f"The calls form a cycle ({', '.join(dumped.repeats)}): each process is written "
            "once; the README says where the one called again is."
        )
    called = f", with {len(meta['called'])} called processes" if meta["called"] else ""
    echo_success(f"Wrote process {node.pk}{called} to {folder}; start with {folder}/README.md.")
