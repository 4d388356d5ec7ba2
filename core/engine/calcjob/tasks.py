"""The transport work of a calc job: upload, submit, retrieve, kill.

Each function is blocking (it runs on the connection's thread) and idempotent against what
is already recorded on the node or on the computer, so a job reloaded from its checkpoint
after a crash never uploads over a running job and is never submitted twice.
"""

from __future__ import annotations

import fnmatch
import posixpath
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from veglia.engine.calcjob.job_poller import computer_contacted
from veglia.engine.calcjob.job_script import EXIT_STATUS_FILE, JobScriptWrap, wrap_commands
from veglia.exceptions import TransportError
from veglia.manage import get_storage
from veglia.orm.loading import load_node
from veglia.relative_paths import checked_relative, inside, remote_join
from veglia.schedulers import JobFailure, JobInfo, JobResources, JobTemplate, SchedulerError
from veglia.transports import Transport, shown_output

if TYPE_CHECKING:
    from veglia.engine.calcjob.calcinfo import CalcInfo
    from veglia.orm.computers import Computer
    from veglia.orm.process_nodes import CalcJobNode

__all__ = ["SCRIPT_NAME", "build_template", "retrieve", "submit", "upload"]

SCRIPT_NAME = "_veglia_submit.sh"
_SUBMIT_RC = ".veglia_submit.rc"


def command_lines(
    node: CalcJobNode, calcinfo: CalcInfo, code: Any, computer: Computer
) -> list[str]:
    """The job's command lines as its script runs them, without the plugins' wraps."""
    options = node.options
    lines = []
    for info in calcinfo.codes_info:
        executable = info.executable or (code.executable if code else None)
        if not executable:
            raise SchedulerError("A command line has no executable and the job has no code.")
        parts = [shlex.quote(executable), *map(shlex.quote, info.cmdline_params)]
        if info.withmpi:
            resources = JobResources(**options.get("resources", {}))
            mpirun = computer.get_property("mpirun_command").format(
                tot_num_mpiprocs=resources.tot_num_mpiprocs
            )
            parts = [mpirun, *parts]
        if info.stdin_name:
            parts.append(f"< {shlex.quote(info.stdin_name)}")
        if info.stdout_name:
            parts.append(f"> {shlex.quote(info.stdout_name)}")
        if info.stderr_name:
            parts.append(f"2> {shlex.quote(info.stderr_name)}")
        lines.append(" ".join(parts))
    return lines


def build_template(
    node: CalcJobNode,
    calcinfo: CalcInfo,
    code: Any,
    computer: Computer,
    wraps: list[JobScriptWrap] | None = None,
) -> str:
    """The submit script of the job, its commands inside the plugins' ``wraps``."""
    options = node.options
    lines = command_lines(node, calcinfo, code, computer)
    commands = wrap_commands(lines, wraps or [])
    prepend = "\n".join(
        t
        for t in (
            computer.get_property("prepend_text"),
            code.prepend_text if code else "",
            options.get("prepend_text", ""),
        )
        if t
    )
    append = "\n".join(
        t
        for t in (
            options.get("append_text", ""),
            code.append_text if code else "",
            computer.get_property("append_text"),
        )
        if t
    )
    environment = dict(options.get("environment_variables", {}))
    cores = options.get("resources", {}).get("num_cores_per_mpiproc")
    if cores:
        # Threads per process as asked (PBS sets it from ompthreads; the others do not): a
        # threaded code otherwise starts one thread per core of the node, oversubscribing
        # its allocation. A value the job sets itself wins.
        environment.setdefault("OMP_NUM_THREADS", str(cores))
    template = JobTemplate(
        commands=commands,
        job_name=f"veglia-{node.uuid[:8]}",
        resources=JobResources(**options.get("resources", {})),
        max_memory_kb=options.get("max_memory_kb"),
        max_wallclock_seconds=options.get("max_wallclock_seconds"),
        queue_name=options.get("queue_name"),
        account=options.get("account"),
        qos=options.get("qos"),
        custom_scheduler_commands=options.get("custom_scheduler_commands", ""),
        prepend_text=prepend,
        append_text=append,
        environment=environment,
    )
    result: str = computer.get_scheduler().get_submit_script(template)
    return result


def upload(
    transport: Transport,
    node: CalcJobNode,
    workdir: str,
    sandbox: Path,
    calcinfo: CalcInfo,
    script: str,
    beside: Mapping[str, bytes] = MappingProxyType({}),
) -> None:
    """Create the work dir and copy the job's files, the files ``beside`` them (the job
    script wraps'), and the submit script into it."""
    transport.makedirs(workdir)
    if transport.exists(posixpath.join(workdir, _SUBMIT_RC)):
        return  # submitted already by an earlier attempt: never touch a live job's files
    for item in sorted(sandbox.iterdir()):
        transport.put(item, posixpath.join(workdir, item.name))
    for name, content in beside.items():
        transport.write_bytes(posixpath.join(workdir, name), content)
    for uuid, source, target in calcinfo.local_copy_list:
        content = load_node(uuid).get_object_content(source)
        path = remote_join(workdir, target, "input file name")
        transport.makedirs(posixpath.dirname(path))
        transport.write_bytes(path, content)
    for source, target in calcinfo.remote_copy_list:
        path = remote_join(workdir, target, "copy target")
        code, _, err = transport.exec_command(f"cp -r {shlex.quote(source)} {shlex.quote(path)}")
        if code != 0:
            raise SchedulerError(f"Copying {source} on the computer failed: {shown_output(err)}")
    for source, target in calcinfo.remote_symlink_list:
        transport.symlink(source, remote_join(workdir, target, "symlink name"))
    transport.write_bytes(posixpath.join(workdir, SCRIPT_NAME), script.encode())


def submit(transport: Transport, computer: Computer, workdir: str) -> str:
    """Submit once: the first submission's output is kept in the work dir and reused."""
    # What the job reads beside it on the computer (a guard's heartbeat) is there first.
    computer_contacted(computer, transport)
    scheduler = computer.get_scheduler()
    command = scheduler.submit_command(SCRIPT_NAME)
    # Read back with bash's own `read`, not `cat`: a process less to start for each.
    line = (
        f"if [ ! -f {_SUBMIT_RC} ]; then ( {command} ) > .veglia_submit.out "
        f"2> .veglia_submit.err; echo $? > {_SUBMIT_RC}; fi; "
        "IFS= read -r -d '' out < .veglia_submit.out; "
        "IFS= read -r -d '' err < .veglia_submit.err; "
        f"read -r rc < {_SUBMIT_RC}; "
        'printf "%s" "$out"; printf "%s" "$err" >&2; exit "${rc:-1}"'
    )
    retval, stdout, stderr = transport.exec_command(line, workdir=workdir, timeout=120)
    try:
        result: str = scheduler.parse_submit_output(retval, stdout, stderr)
        return result
    except SchedulerError:
        # A failed submission must be retried, not replayed from the marker.
        transport.exec_command(f"rm -f {_SUBMIT_RC}", workdir=workdir, timeout=60)
        raise


def retrieve(
    transport: Transport,
    computer: Computer,
    workdir: str,
    patterns: list[str],
    last_info: JobInfo | None,
) -> tuple[Path, dict[str, Any]]:
    """Copy the files matching ``patterns`` into a new local folder; read the job's outcome."""
    # In the repository's own temporary folder: the parse links each file into the
    # repository there, rather than copy it once more (FileRepository.adopt).
    target = Path(
        tempfile.mkdtemp(prefix="retrieved-", dir=get_storage().repository.temporary_folder())
    )
    # The job could replace its own folder, or one veglia made above it, with a link: then
    # nothing of it is read (the files below are checked as they are reached).
    root, made = computer.job_workdir_parts(workdir)
    link = transport.linked_part(root, made)
    if link is not None:
        failure = computer.get_scheduler().classify_failure(last_info, "")
        return target, {
            "workdir_link": posixpath.join(root, link),
            "failure": failure.value if isinstance(failure, JobFailure) else None,
        }
    names = transport.listdir(workdir)
    skipped: list[str] = []
    for pattern in map(checked_retrieve_pattern, patterns):
        directory, _, name_pattern = pattern.rpartition("/")
        folder = posixpath.join(workdir, directory) if directory else workdir
        candidates = names
        if directory:
            # A link anywhere along the folder (``d`` of ``d/sub/*``), not only at its end,
            # could lead outside the work dir: nothing below it is retrieved.
            link = transport.linked_part(workdir, directory)
            if link is not None:
                skipped.append(f"{link} (a link on the path of {pattern})")
            real = link is None and transport.is_real_dir(folder)
            candidates = transport.listdir(folder) if real else []
        for name in fnmatch.filter(candidates, name_pattern):
            relative = posixpath.join(directory, name) if directory else name
            local = inside(target, relative)
            local.parent.mkdir(parents=True, exist_ok=True)
            # Only regular files and folders: a link or a device the job made could point
            # anywhere on the computer (or be /dev/zero), a FIFO would block the connection.
            skipped += transport.get_regular(posixpath.join(folder, name), local, relative)
    outcome: dict[str, Any] = {"skipped": skipped} if skipped else {}
    status = _read_small(transport, posixpath.join(workdir, EXIT_STATUS_FILE), 64)
    if status is not None:
        text = status.decode(errors="replace").strip()
        outcome["exit_status"] = int(text) if text.lstrip("-").isdigit() else None
    stderr = ""
    for name in ("_scheduler-stderr.txt", "_scheduler-stdout.txt"):
        tail = _read_small(transport, posixpath.join(workdir, name), 65536, tail=True)
        stderr += (tail or b"").decode(errors="replace")
    failure = computer.get_scheduler().classify_failure(last_info, stderr)
    outcome["failure"] = failure.value if isinstance(failure, JobFailure) else None
    return target, outcome


def checked_retrieve_pattern(pattern: str) -> str:
    return checked_relative(pattern, "retrieve pattern")


def _read_small(transport: Transport, path: str, limit: int, *, tail: bool = False) -> bytes | None:
    """At most ``limit`` bytes (the last ones with ``tail``) of a file veglia itself reads
    from the work dir; None when it is missing or is not a regular file."""
    try:
        info = transport.lstat(path)
    except TransportError:
        return None
    if not info.is_file:
        return None
    offset = max(0, info.size - limit) if tail else 0
    return transport.read_bytes(path, offset=offset, size=limit)
