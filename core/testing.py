"""Test doubles for plugin authors: a transport and a scheduler that need no computer.

As httpx ships ``MockTransport``, veglia ships these so a monitor, a parser or a
calculation can be tested without sshd or a batch system:

- :class:`FakeTransport` is a whole :class:`~veglia.transports.Transport`: a sandbox folder
  on this machine stands for the computer, every call is recorded, commands can be
  answered by the test (or run with bash in the sandbox), and any call can be made to fail.
- :class:`FakeScheduler` is a :class:`~veglia.schedulers.Scheduler` whose jobs the test
  drives: a submission gets an id and waits, queued, until the test starts, runs or
  finishes it; listings report what the test set. Its jobs live in a :class:`FakeCluster`.
- :class:`FakeNode` is a running job's node as a monitor sees it, in memory.

Example, a monitor tested against a file the "job" wrote::

    from veglia.testing import FakeNode, FakeTransport

    def test_my_monitor_stops_on_nan():
        with FakeTransport() as transport:
            (transport.root / "out.log").write_text("energy = NaN\\n")
            assert my_monitor(FakeNode(), transport, path="out.log")
            assert [call.name for call in transport.calls] == ["read_bytes"]

Both can also be registered as entry points of a test package (``fake.transport =
"veglia.testing:FakeTransport"``) to run a whole calc job through the engine; see
docs/plugins.md, "Testing your plugin".
"""

from __future__ import annotations

import copy
import errno
import functools
import getpass
import itertools
import os
import re
import shlex
import shutil
import signal
import stat as stat_module
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from veglia.exceptions import (
    SchedulerError,
    SchedulerSubmitError,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
)
from veglia.orm import attributes as attr
from veglia.schedulers import JobFailure, JobInfo, JobState, JobTemplate, Scheduler
from veglia.transports import AuthOption, FileStat, Transport

__all__ = ["Call", "FakeCluster", "FakeNode", "FakeScheduler", "FakeTransport"]

#: What a command handler returns: (exit code, stdout, stderr).
CommandResult = tuple[int, str, str]
#: A function answering a command: ``(command, workdir, stdin) -> (exit code, stdout, stderr)``.
CommandHandler = Callable[[str, str | None, bytes | None], CommandResult]


@dataclass
class Call:
    """One call a :class:`FakeTransport` received: the method's name and its arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


#: The Transport methods a FakeTransport records (and can be told to fail).
_RECORDED = (
    "putfile", "getfile", "read_bytes", "write_bytes", "listdir", "stat", "lstat", "makedirs",
    "remove", "rmtree", "symlink", "exec_command", "gotocomputer_command", "exists", "isdir",
    "isfile", "is_real_dir", "get_regular", "puttree", "gettree", "put", "get", "home",
    "whoami",
)  # fmt: skip


def _recorded(method: Callable[..., Any]) -> Callable[..., Any]:
    """Record the call (unless another recorded method of the transport made it) and raise
    the failure the test asked for, if any (also inside another method)."""

    @functools.wraps(method)
    def wrapper(self: FakeTransport, *args: Any, **kwargs: Any) -> Any:
        local = self._local_state
        with self._lock:
            if not getattr(local, "depth", 0):
                self.calls.append(Call(method.__name__, args, dict(kwargs)))
            failures = self._failures.get(method.__name__)
            failure = failures.pop(0) if failures else None
        if failure is not None:
            raise failure
        local.depth = getattr(local, "depth", 0) + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            local.depth -= 1

    return wrapper


class FakeTransport(Transport):
    """A computer in a sandbox folder on this machine, recording every call.

    Paths are this machine's own paths, absolute or relative to :attr:`cwd` (the sandbox,
    :attr:`root`, until changed), so commands see the same files the methods do. File
    methods refuse paths outside the sandbox with a :class:`TransportError`, so a plugin
    under test cannot touch the real machine by mistake (commands are not confined: this
    is a convenience, not a security boundary). :meth:`home` is ``<root>/home``,
    :meth:`whoami` the local user.

    Like ``core.ssh``, it must be opened (``with FakeTransport() as transport:``): a plugin
    that forgets it fails here rather than on a real computer.

    - :attr:`calls` lists every call in order (:class:`Call`; a call a recorded method made
      itself, as :meth:`get_regular` calling :meth:`getfile`, is not listed);
      :attr:`commands` the command lines run.
    - :meth:`respond` answers commands matching a pattern; others run with bash in the
      sandbox (``HOME`` set to :meth:`home`), or, with ``shell=False``, raise
      :class:`TransportError`.
    - :meth:`fail` makes the next calls of a method raise, to test error handling.
    - The test sets files up directly under :attr:`root` (a :class:`~pathlib.Path`),
      without recording them.

    ``root`` and ``shell`` are also connection parameters, so a stored computer can be
    configured with them (``computer.configure(root=...)``): the engine makes a new
    transport per connection, and they must share a sandbox. Without ``root`` each
    transport gets a new temporary folder, removed with it.
    """

    auth_options = (
        AuthOption("root", "Sandbox folder standing for the computer (default: a new one)."),
        AuthOption("shell", "Run unanswered commands with bash (else refuse them).", bool, True),
    )

    def __init__(self, hostname: str = "fake", **auth_params: Any) -> None:
        super().__init__(hostname, **auth_params)
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        if self.auth_params["root"]:
            root = Path(self.auth_params["root"]).expanduser().resolve()
            root.mkdir(parents=True, exist_ok=True)
        else:
            self._tempdir = tempfile.TemporaryDirectory(prefix="veglia-fake-")
            root = Path(self._tempdir.name).resolve()
        #: The sandbox folder; tests may create and read files under it directly.
        self.root = root
        self.cwd = str(root)
        #: Every call received, in order.
        self.calls: list[Call] = []
        self._responses: list[tuple[re.Pattern[str], CommandResult | CommandHandler]] = []
        self._failures: dict[str, list[BaseException]] = {}
        self._open = False
        self._lock = threading.Lock()
        self._local_state = threading.local()

    # -- what tests use -------------------------------------------------------------------
    @property
    def commands(self) -> list[str]:
        """The command lines :meth:`exec_command` received, in order."""
        calls = [call for call in self.calls if call.name == "exec_command"]
        return [call.args[0] if call.args else call.kwargs["command"] for call in calls]

    def respond(self, pattern: str, result: CommandResult | CommandHandler) -> None:
        """Answer commands matching the regex ``pattern`` (searched; the latest registered
        wins) with ``result``: an ``(exit code, stdout, stderr)`` tuple, or a function of
        ``(command, workdir, stdin)`` returning one."""
        self._responses.insert(0, (re.compile(pattern), result))

    def fail(self, method: str, error: BaseException | None = None, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` raise ``error`` (by default a
        :class:`TransportConnectionError`, as when the connection drops), also when another
        method makes them (:meth:`exists` calling :meth:`stat`)."""
        if method not in _RECORDED:
            raise ValueError(f"FakeTransport cannot fail {method!r}: use one of {_RECORDED}")
        error = error or TransportConnectionError(f"{method} failed on {self.hostname} (fake)")
        self._failures.setdefault(method, []).extend([error] * times)

    # -- connection -------------------------------------------------------------------------
    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def _local(self, path: str | Path, *, confined: bool = True) -> str:
        """``path`` made absolute; an error unless open, and (``confined``) in the sandbox."""
        if not self._open:
            raise TransportConnectionError(
                f"The FakeTransport to {self.hostname} is not open: use `with "
                "FakeTransport() as transport:` or call open() first, as for any transport."
            )
        absolute = self.path(path)
        root = str(self.root)
        if confined and absolute != root and not absolute.startswith(root.rstrip("/") + "/"):
            raise TransportError(
                f"{absolute} is outside the FakeTransport's sandbox {root}: a test must not "
                "reach the real machine's files."
            )
        return absolute

    def _os_error(self, action: str, path: str, exc: OSError) -> TransportError:
        return TransportError(
            f"Could not {action} {path} on {self.hostname}: {exc.strerror or exc}"
        )

    def _open_regular(self, source: str) -> BinaryIO:
        """The file opened for reading, refused unless it is a regular file (checked on the
        descriptor: no symlink followed, no FIFO waited on), as the real transports do."""
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            fd = None
        if fd is None or not stat_module.S_ISREG(os.fstat(fd).st_mode):
            if fd is not None:
                os.close(fd)
            raise TransportError(
                f"{source} on {self.hostname} is not a regular file (a link, FIFO or device): "
                "veglia reads only regular files from a job's folder."
            )
        return os.fdopen(fd, "rb")

    # -- files ------------------------------------------------------------------------------
    def putfile(self, localpath: str | Path, remotepath: str) -> None:
        target = self._local(remotepath)
        try:
            shutil.copyfile(localpath, target)
        except OSError as exc:
            raise self._os_error("copy a file to", target, exc) from None

    def getfile(self, remotepath: str, localpath: str | Path) -> None:
        source = self._local(remotepath)
        try:
            with self._open_regular(source) as handle, open(localpath, "wb") as target:
                shutil.copyfileobj(handle, target)
        except OSError as exc:
            Path(localpath).unlink(missing_ok=True)
            raise self._os_error("copy a file from", source, exc) from None

    def read_bytes(self, remotepath: str, offset: int = 0, size: int | None = None) -> bytes:
        source = self._local(remotepath)
        try:
            with self._open_regular(source) as handle:
                handle.seek(offset)
                return handle.read() if size is None else handle.read(size)
        except OSError as exc:
            raise self._os_error("read", source, exc) from None

    def write_bytes(self, remotepath: str, data: bytes) -> None:
        target = self._local(remotepath)
        try:
            Path(target).write_bytes(data)
        except OSError as exc:
            raise self._os_error("write", target, exc) from None

    def listdir(self, path: str = ".") -> list[str]:
        folder = self._local(path)
        try:
            return sorted(os.listdir(folder))
        except OSError as exc:
            raise self._os_error("list", folder, exc) from None

    def stat(self, path: str) -> FileStat:
        return self._stat(path, os.stat)

    def lstat(self, path: str) -> FileStat:
        return self._stat(path, os.lstat)

    def _stat(self, path: str, how: Callable[[str], os.stat_result]) -> FileStat:
        target = self._local(path)
        try:
            result = how(target)
        except OSError as exc:
            raise self._os_error("stat", target, exc) from None
        return FileStat(size=result.st_size, mtime=result.st_mtime, mode=result.st_mode)

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        target = self._local(path)
        try:
            os.makedirs(target, exist_ok=exist_ok)
        except OSError as exc:
            raise self._os_error("create the folder", target, exc) from None

    def remove(self, path: str) -> None:
        target = self._local(path)
        try:
            os.remove(target)
        except OSError as exc:
            raise self._os_error("remove", target, exc) from None

    def rmtree(self, path: str) -> None:
        target = self._local(path)
        if target == str(self.root):
            raise TransportError("Refusing to remove the FakeTransport's whole sandbox.")
        try:
            shutil.rmtree(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._os_error("remove the folder", target, exc) from None

    def symlink(self, source: str, link: str) -> None:
        target = self._local(link)
        try:
            os.symlink(self.path(source), target)
        except OSError as exc:
            raise self._os_error("create the symlink", target, exc) from None

    def home(self) -> str:
        """``<root>/home``, created when first asked."""
        home = self._local(self.root / "home")
        os.makedirs(home, exist_ok=True)
        return home

    def whoami(self) -> str:
        return getpass.getuser()

    # -- commands ---------------------------------------------------------------------------
    def exec_command(
        self,
        command: str,
        *,
        workdir: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        """The answer :meth:`respond` registered for ``command``, else its run with bash in
        ``workdir`` (by default :meth:`home`); raises :class:`TransportTimeoutError` past
        ``timeout`` seconds."""
        directory = self._local(workdir, confined=False) if workdir else None
        for pattern, result in self._responses:
            if pattern.search(command):
                return result(command, directory, stdin) if callable(result) else result
        if not self.auth_params["shell"]:
            raise TransportError(
                f"FakeTransport has no answer for `{command}` and runs no shell (shell=False): "
                "register one with respond()."
            )
        home = self.home()
        try:
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=directory or home,
                env={**os.environ, "HOME": home},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise self._os_error("run a command in", directory or home, exc) from None
        try:
            stdout, stderr = process.communicate(stdin or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise TransportTimeoutError(
                f"`{command}` on {self.hostname} ran past its timeout of {timeout} s."
            ) from None
        return process.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")

    def gotocomputer_command(self, workdir: str) -> str:
        return f"cd {shlex.quote(self.path(workdir))} && exec bash -l"


for _name in _RECORDED:
    setattr(FakeTransport, _name, _recorded(getattr(FakeTransport, _name)))
del _name


# -- the node -------------------------------------------------------------------------------
class FakeNode:
    """A running job's node as a monitor sees it, kept in memory: its attributes (the
    engine's ``options``, ``remote_workdir``, ``job_id``, ``last_job_info`` — the
    scheduler's last word on the job as a dict of JobInfo's fields, ``state`` as text —
    ``submitted_at``...) and the log lines monitors add (:attr:`logs`, ``(level,
    message)``)."""

    def __init__(
        self,
        attributes: dict[str, Any] | None = None,
        *,
        options: dict[str, Any] | None = None,
        remote_workdir: str | None = None,
        job_id: str | None = None,
        uuid: str = "00000000-0000-4000-8000-000000000000",
        pk: int = 1,
    ) -> None:
        self.attributes: dict[str, Any] = dict(attributes or {})
        for key, value in (("options", options), ("remote_workdir", remote_workdir)):
            if value is not None:
                self.attributes[key] = value
        if job_id is not None:
            self.attributes[attr.JOB_ID] = job_id
        self.uuid, self.pk, self.label = uuid, pk, ""
        #: ``(level, message)`` of every :meth:`add_log`, in order.
        self.logs: list[tuple[str, str]] = []

    def get_attribute(self, key: str, default: Any = None) -> Any:
        """A copy, as a stored node gives: changing it changes nothing on the node."""
        return copy.deepcopy(self.attributes.get(key, default))

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = copy.deepcopy(value)

    def add_log(self, level: str, message: str, **details: Any) -> None:
        self.logs.append((level, message))

    @property
    def options(self) -> dict[str, Any]:
        return self.get_attribute(attr.OPTIONS, {})

    @property
    def remote_workdir(self) -> str | None:
        return self.get_attribute(attr.REMOTE_WORKDIR)

    @property
    def job_id(self) -> str | None:
        return self.get_attribute(attr.JOB_ID)


# -- the scheduler --------------------------------------------------------------------------
class FakeCluster:
    """The batch system behind :class:`FakeScheduler`: its jobs, as the test sets them.

    Thread-safe, so a test can drive jobs from a thread while the engine runs a calc job
    in the foreground (:meth:`wait_for_submission` tells it when the job arrived).
    """

    def __init__(self) -> None:
        #: Jobs by id, in submission order; a forgotten job is removed.
        self.jobs: dict[str, JobInfo] = {}
        #: Every id ever submitted, in order.
        self.submitted: list[str] = []
        self._ids = itertools.count(1001)
        self._refusals: list[SchedulerSubmitError] = []
        self._changed = threading.Condition()

    def reset(self) -> None:
        """Forget every job and pending refusal (between tests)."""
        with self._changed:
            self.jobs.clear()
            self.submitted.clear()
            self._refusals.clear()

    def job(self, job_id: str) -> JobInfo:
        """The job as the cluster reports it; KeyError when it does not know it."""
        with self._changed:
            return self.jobs[job_id]

    def refuse_next_submission(self, message: str, *, permanent: bool = True) -> None:
        """Make the next submission fail with a :class:`SchedulerSubmitError`."""
        with self._changed:
            self._refusals.append(SchedulerSubmitError(message, permanent=permanent))

    def set_state(
        self,
        job_id: str,
        state: JobState,
        reason: str = "",
        wallclock_seconds: int | None = None,
    ) -> None:
        """Move a job to ``state`` (queued, held, running, suspended...), with the
        scheduler's ``reason`` and the seconds it has run."""
        with self._changed:
            info = self.jobs[job_id]
            info.state, info.raw_state, info.reason = state, state.value.upper(), reason
            info.wallclock_seconds = wallclock_seconds
            self._changed.notify_all()

    def start(self, job_id: str) -> None:
        """The job starts running."""
        self.set_state(job_id, JobState.RUNNING)

    def finish(self, job_id: str, exit_code: int = 0, failure: JobFailure | None = None) -> None:
        """The job ends with ``exit_code``; ``failure`` says why the batch system ended it
        (out of memory, out of wall time...), None when it ended on its own."""
        with self._changed:
            info = self.jobs[job_id]
            info.state, info.raw_state = JobState.DONE, "DONE"
            info.exit_code, info.failure = exit_code, failure
            self._changed.notify_all()

    def forget(self, job_id: str) -> None:
        """The cluster forgets the job (as SLURM does ``MinJobAge`` after it ends): it no
        longer appears in listings, which the engine takes as finished."""
        with self._changed:
            self.jobs.pop(job_id, None)
            self._changed.notify_all()

    def run(self, job_id: str, transport: Transport, timeout: float | None = 600) -> int:
        """Run the job's script for real: with bash in its work dir through ``transport``
        (a FakeTransport on the same sandbox, ``core.local``...), then finish it with the
        script's exit code, which is returned."""
        info = self.job(job_id)
        self.start(job_id)
        script = shlex.quote(info.details["script"])
        code, _, _ = transport.exec_command(
            f"bash {script}", workdir=info.details["workdir"], timeout=timeout
        )
        self.finish(job_id, exit_code=code)
        return code

    def wait_for_submission(self, count: int = 1, timeout: float = 60) -> str:
        """Block until ``count`` jobs were submitted in all; the id of the ``count``-th."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.submitted) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no job submitted to the FakeCluster in {timeout} s")
                self._changed.wait(left)
            return self.submitted[count - 1]

    # -- what FakeScheduler calls -----------------------------------------------------------
    def _submit(self, workdir: str, script: str) -> str:
        with self._changed:
            if self._refusals:
                raise self._refusals.pop(0)
            for job_id, info in self.jobs.items():  # the same submission, replayed
                if info.details.get("workdir") == workdir and info.details["script"] == script:
                    return job_id
            job_id = str(next(self._ids))
            self.jobs[job_id] = JobInfo(
                job_id,
                JobState.QUEUED,
                raw_state="QUEUED",
                title=os.path.basename(script),
                details={"workdir": workdir, "script": script},
            )
            self.submitted.append(job_id)
            self._changed.notify_all()
            return job_id

    def _cancel(self, job_id: str) -> None:
        with self._changed:
            info = self.jobs.get(job_id)
            if info is not None and info.state is not JobState.DONE:
                info.state, info.raw_state = JobState.DONE, "CANCELLED"
                info.failure = JobFailure.CANCELLED
                self._changed.notify_all()


_MARKER = "#veglia-fake-scheduler"
_SUBMITTED = re.compile(r"veglia-fake-submitted (/.*)")
_KILLED = re.compile(r"veglia-fake-killed (\d+)")
_JOB_ID = re.compile(r"\d+")
_FIELDS = ("job_id", "state", "raw_state", "exit_code", "failure", "wallclock_seconds", "reason")


def _check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise SchedulerError(f"{job_id!r} is not a FakeScheduler job id (digits).")
    return job_id


class FakeScheduler(Scheduler):
    """A scheduler whose jobs the test drives, through a :class:`FakeCluster`.

    It talks through the transport as a real one does: the submit command (run in the work
    dir) prints where the script is, and the job gets an id and waits, queued; the list
    command prints the states the test set; the kill command marks the job cancelled.
    Nothing runs until the test says so: :meth:`FakeCluster.start`,
    :meth:`~FakeCluster.finish`, or :meth:`~FakeCluster.run` to run the script for real.

    Every FakeScheduler made without ``cluster`` shares :attr:`cluster`: the engine makes a
    new scheduler whenever it needs one (``Computer.get_scheduler()``), so a test reaches
    the jobs the engine submitted through ``FakeScheduler.cluster``; reset it between tests.

    Scripts get one ``#FAKE`` directive line per template request, and send the job's
    output to the template's stdout and stderr files; every request is accepted.
    """

    reports_finished_jobs = True
    example_empty_listing = (0, f"{_MARKER}\n", "")

    #: The cluster of every FakeScheduler made without one.
    cluster: ClassVar[FakeCluster] = FakeCluster()

    def __init__(self, cluster: FakeCluster | None = None) -> None:
        if cluster is not None:
            self.cluster = cluster

    # -- script -------------------------------------------------------------------------------
    def script_header(self, template: JobTemplate) -> list[str]:
        res = template.resources
        requests = {
            "job-name": template.job_name,
            "nodes": res.num_machines,
            "mpiprocs-per-node": res.num_mpiprocs_per_machine,
            "cores-per-mpiproc": res.num_cores_per_mpiproc,
            "memory-kb": template.max_memory_kb,
            "walltime-seconds": template.max_wallclock_seconds,
            "queue": template.queue_name,
            "account": template.account,
            "qos": template.qos,
        }
        lines = [
            f"#FAKE --{name}={' '.join(str(value).split())}"  # one line, whatever it holds
            for name, value in requests.items()
            if value is not None
        ]
        stdout, stderr = shlex.quote(template.stdout_name), shlex.quote(template.stderr_name)
        return [*lines, f"exec > {stdout} 2> {stderr}"]

    # -- submit -------------------------------------------------------------------------------
    def submit_command(self, script_name: str) -> str:
        return f'printf "veglia-fake-submitted %s/%s\\n" "$PWD" {shlex.quote(script_name)}'

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        lines = stdout.strip().splitlines()
        match = _SUBMITTED.fullmatch(lines[-1]) if lines else None
        if retval != 0 or not match:
            raise SchedulerError(
                f"The fake submission failed (exit {retval}): {stderr.strip() or stdout.strip()}"
            )
        workdir, _, script = match.group(1).rpartition("/")
        return self.cluster._submit(workdir or "/", f"{workdir}/{script}")

    # -- list ---------------------------------------------------------------------------------
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """A ``printf`` of the cluster's jobs as they are now (all of them without
        ``job_ids``; ``user`` is ignored): one ``id|state|raw state|exit code|failure|
        wallclock seconds|reason`` line each, after a marker line."""
        wanted = [_check_job_id(job_id) for job_id in job_ids] if job_ids else None
        with self.cluster._changed:
            infos = [
                info for info in self.cluster.jobs.values()
                if wanted is None or info.job_id in wanted
            ]  # fmt: skip
            lines = [_MARKER] + [
                "|".join(
                    [
                        info.job_id,
                        info.state.value,
                        info.raw_state,
                        "" if info.exit_code is None else str(info.exit_code),
                        info.failure.value if info.failure else "",
                        "" if info.wallclock_seconds is None else str(info.wallclock_seconds),
                        " ".join(info.reason.split()),
                    ]
                )
                for info in infos
            ]
        return "printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines)

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        lines = [line for line in stdout.splitlines() if line.strip()]
        if retval != 0 or not lines or lines[0] != _MARKER:
            raise SchedulerError(
                f"The fake listing failed (exit {retval}): "
                f"{(stderr.strip() or stdout.strip() or '(no output)')[:500]}"
            )
        infos = []
        for line in lines[1:]:
            values = line.split("|", len(_FIELDS) - 1)
            if len(values) != len(_FIELDS) or not _JOB_ID.fullmatch(values[0]):
                raise SchedulerError(f"The fake listing has a line it does not know: {line!r}")
            job_id, state, raw_state, exit_code, failure, wallclock, reason = values
            try:
                info = JobInfo(
                    job_id,
                    JobState(state),
                    raw_state=raw_state,
                    reason=reason,
                    exit_code=int(exit_code) if exit_code else None,
                    failure=JobFailure(failure) if failure else None,
                    wallclock_seconds=int(wallclock) if wallclock else None,
                )
            except ValueError:
                raise SchedulerError(f"The fake listing has a wrong value: {line!r}") from None
            known = self.cluster.jobs.get(job_id)
            if known is not None:
                info.title, info.details = known.title, dict(known.details)
            infos.append(info)
        return infos

    # -- kill ---------------------------------------------------------------------------------
    def kill_command(self, job_id: str) -> str:
        return f"printf 'veglia-fake-killed %s\\n' {_check_job_id(job_id)}"

    def parse_kill_output(self, retval: int, stdout: str, stderr: str) -> bool:
        """True when the kill command ran; the job is then cancelled (DONE, CANCELLED)."""
        match = _KILLED.search(stdout)
        if retval != 0 or not match:
            return False
        self.cluster._cancel(match.group(1))
        return True
