"""Running a job's monitors after a scheduler poll, and keeping their state on the node.

Faults of a monitor are not faults of the job: a monitor that raises, hangs past its timeout
or returns something else than ``str | MonitorResult | None`` is retried at the next poll,
and disabled after ``max_failures`` such faults in a row that span at least
``FAULT_WINDOW`` seconds (so a fast poll does not disable it within a second); each is
logged on the node, and `veglia process show` names a disabled monitor and why.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from veglia.engine.calcjob import kill
from veglia.engine.calcjob.file_watch import links_in, requests_for, slices_from, watches_of
from veglia.engine.calcjob.monitors import MonitorResult, MonitorSpec, load_monitor, now
from veglia.engine.runner import get_runner
from veglia.exceptions import MonitorError, TransportError
from veglia.orm import attributes as attr
from veglia.orm.attributes import MONITOR_STATE, MONITORS

if TYPE_CHECKING:
    from veglia.engine.calcjob import CalcJob
    from veglia.engine.transport_queue import TransportLease

__all__ = ["CALLS", "MonitorRunner", "run_monitors"]

# Synchronous monitors run here, so a slow one never stalls the event loop or the
# connection's thread; their transport calls are passed to the connection's thread.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="veglia-monitor")

#: Monitor calls made in this process (the daemon worker reports it; bench/ reads it).
CALLS = {"count": 0}
#: Seconds a monitor's run of faults must span, besides counting ``max_failures``, before
#: it is disabled: a fault counts per poll, and polls may come every tenth of a second.
FAULT_WINDOW = 60.0
#: Seconds after which a monitor's ``last_call`` is written even when nothing else changed.
#: Only monitors with a ``minimum_poll_interval`` need it exact (and get it at every call):
#: writing a thousand jobs' states at every poll is what kept the engine from keeping up.
LAST_CALL_REFRESH = 60.0


@functools.lru_cache(maxsize=256)
def _takes_state(function: Any) -> bool:
    return "state" in inspect.signature(function).parameters


def _what_is_kept(states: dict[str, Any], specs: list[MonitorSpec]) -> str:
    """The states as they must be stored: without the last call of monitors that have no
    interval (informative only; written every LAST_CALL_REFRESH seconds)."""
    exact = {spec.name for spec in specs if spec.minimum_poll_interval}
    kept = {
        name: {k: v for k, v in record.items() if k != "last_call" or name in exact}
        for name, record in states.items()
    }
    return json.dumps(kept, sort_keys=True, default=str)


class _JobTransport:
    """The job's transport as a monitor sees it: relative paths are relative to the job's
    work directory, and every call runs on the connection's own thread."""

    def __init__(self, lease: TransportLease, workdir: str) -> None:
        self._lease = lease
        self._workdir = workdir

    def _in_connection_thread(self, name: str, args: Any, kwargs: Any) -> Any:
        transport = self._lease.transport
        transport.cwd = self._workdir  # safe: this thread runs one call at a time
        return getattr(transport, name)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._lease.transport, name)
        return self._wrap(name) if callable(attribute) else attribute


class BlockingTransport(_JobTransport):
    """For synchronous monitors (running in the monitor pool): calls block until done."""

    def _wrap(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            executor = self._lease._entry.executor
            return executor.submit(self._in_connection_thread, name, args, kwargs).result()

        return call


class AsyncTransport(_JobTransport):
    """For ``async def`` monitors: every call is awaited."""

    def _wrap(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._lease.run(self._in_connection_thread, name, args, kwargs)

        return call


def _fresh_state(spec: MonitorSpec) -> dict[str, Any]:
    return {
        "last_call": None,
        "failures": 0,
        "first_failure": None,
        "last_fault": "",
        "disabled": spec.disable_on_start,
        "disabled_reason": "disabled on start" if spec.disable_on_start else "",
        "last_result": None,
        "data": {},
    }


class MonitorRunner:
    """One cycle of a job's monitors."""

    def __init__(self, process: CalcJob) -> None:
        self.process = process
        assert process.node is not None
        self.node = process.node
        #: This cycle's watch_files monitors, their file reads (by monitor name), the
        #: offsets to keep once they have seen them, and declarations that are broken.
        self._watched: set[str] = set()
        self._answers: dict[str, Any] | None = {}
        self._kept: dict[str, Any] = {}
        self._bad_watch: dict[str, str] = {}
        self._functions: dict[str, Any] = {}

    def _specs(self) -> list[MonitorSpec]:
        """The job's monitors, read once per process: they are fixed at submission."""
        specs = getattr(self.process, "_monitor_specs", None)
        if specs is None:
            specs = [MonitorSpec(**data) for data in self.node.get_attribute(MONITORS, [])]
            self.process._monitor_specs = specs  # type: ignore[attr-defined]
        return specs

    def _load(self, spec: MonitorSpec) -> Any:
        """The monitor's function (loaded once per cycle; an error raised again each time)."""
        if spec.name not in self._functions:
            try:
                self._functions[spec.name] = load_monitor(spec.entry_point)
            except Exception as exc:
                self._functions[spec.name] = exc
        function = self._functions[spec.name]
        if isinstance(function, Exception):
            raise function
        return function

    def _due(self, specs: list[MonitorSpec], states: dict[str, Any]) -> list[Any]:
        """(spec, state) of the monitors to call this cycle, in call order."""
        due = []
        for spec in specs:
            state = states.setdefault(spec.name, _fresh_state(spec))
            if state["disabled"]:
                continue
            interval = spec.minimum_poll_interval
            if interval and state["last_call"] and now() - state["last_call"] < interval:
                continue
            due.append((spec, state))
        return due

    async def _read_watched(self, due: list[Any]) -> dict[str, Any] | None:
        """The answers to the file reads of the due ``watch_files`` monitors, by monitor
        name, read with the other jobs' in one call; None when the read failed."""
        workdir = self.node.remote_workdir or "/"
        counts: list[tuple[str, int]] = []
        requests: list[dict[str, Any]] = []
        for spec, state in due:
            try:
                function = self._load(spec)
            except Exception:
                continue  # a fault of its own when it is called
            if watches_of(function) is None:
                continue
            self._watched.add(spec.name)
            try:
                wanted = requests_for(function, spec.kwargs, workdir, state.get("files", {}))
            except MonitorError as exc:
                self._bad_watch[spec.name] = str(exc)
                continue
            counts.append((spec.name, len(wanted)))
            requests += wanted
        if not requests:
            return {}
        try:
            answers = await get_runner().file_batcher(self.process.computer).read(requests)
        except Exception as exc:  # the computer's fault: the poller's backoff handles it
            names = ", ".join(name for name, _ in counts)
            self.node.add_log("WARNING", f"monitor {names}: reading the files failed: {exc}")
            return None
        by_name, start = {}, 0
        for name, count in counts:
            by_name[name] = answers[start : start + count]
            start += count
            self._report_links(name, by_name[name], workdir)
        return by_name

    def _report_links(self, name: str, answers: list[Any], workdir: str) -> None:
        """Say once per job and link that a watched file was not read for a link on its way."""
        reported: set[tuple[str, str]] = self.process.__dict__.setdefault("_links_reported", set())
        for path, link in links_in(answers).items():
            if (name, link) not in reported:
                reported.add((name, link))
                self.node.add_log(
                    "WARNING",
                    f"monitor {name}: {posixpath.relpath(path, workdir)} is not read: {link} "
                    "is a link, and veglia follows no link in a job's folder",
                )

    async def run_cycle(self, lease: TransportLease) -> tuple[str, MonitorResult] | None:
        """Call the monitors that are due; return (name, result) of the one that stops the job."""
        specs = self._specs()
        states: dict[str, dict[str, Any]] = self.node.get_attribute(MONITOR_STATE, {})
        before = _what_is_kept(states, specs)
        last_write = max((r.get("last_call") or 0 for r in states.values()), default=0)
        due = self._due(specs, states)
        self._answers = await self._read_watched(due)
        outcome = None
        for spec, state in due:
            if self._answers is None and spec.name in self._watched:
                continue  # its files could not be read: not its fault, try at the next poll
            state["last_call"] = now()
            result = await self._call_safely(spec, lease, state)
            if result is None:
                continue
            state["last_result"] = {"action": result.action, "message": result.message}
            if result.outputs:
                self._attach_outputs(spec.name, result.outputs)
            if result.action == "disable-self":
                self._disable(spec.name, state, result.message or "disabled itself")
                continue
            if result.action == "disable-all":
                for name, other in states.items():
                    self._disable(name, other, f"disabled by {spec.name}: {result.message}")
                for other_spec in specs:
                    if other_spec.name not in states:
                        states[other_spec.name] = _fresh_state(other_spec)
                        self._disable(
                            other_spec.name,
                            states[other_spec.name],
                            f"disabled by {spec.name}: {result.message}",
                        )
                break
            outcome = (spec.name, result)
            break  # the first result that acts wins this cycle
        if now() - last_write >= LAST_CALL_REFRESH or _what_is_kept(states, specs) != before:
            self.node.set_attribute(MONITOR_STATE, states)
        return outcome

    async def _call_safely(
        self, spec: MonitorSpec, lease: TransportLease, state: dict[str, Any]
    ) -> MonitorResult | None:
        try:
            result = await self._call(spec, lease, state)
        except TransportError as exc:  # the computer's fault, not the monitor's
            self.node.add_log("WARNING", f"monitor {spec.name}: transport failed: {exc}")
            return None
        except asyncio.TimeoutError:
            return self._failed(spec, state, f"timed out after {spec.timeout:g} s")
        except Exception as exc:
            return self._failed(spec, state, f"raised {type(exc).__name__}: {exc}")
        if spec.name in self._kept:  # seen without fault: the next cycle reads on from here
            state["files"] = self._kept.pop(spec.name)
        if result is None:
            state["failures"], state["first_failure"] = 0, None
            return None
        if isinstance(result, str):
            result = MonitorResult(message=result)
        if not isinstance(result, MonitorResult):
            return self._failed(
                spec,
                state,
                f"returned {type(result).__name__}, not a message, a MonitorResult or None",
            )
        state["failures"], state["first_failure"] = 0, None
        return result

    async def _call(self, spec: MonitorSpec, lease: TransportLease, state: dict[str, Any]) -> Any:
        CALLS["count"] += 1
        function = self._load(spec)
        kwargs = dict(spec.kwargs)
        if _takes_state(function):
            kwargs["state"] = state["data"]
        workdir = self.node.remote_workdir or "/"
        if spec.name in self._bad_watch:
            raise MonitorError(self._bad_watch[spec.name])
        if self._answers and spec.name in self._answers:
            known = state.get("files", {})
            answers = self._answers[spec.name]
            kwargs["files"], self._kept[spec.name] = slices_from(
                function, spec.kwargs, workdir, known, answers
            )
        if inspect.iscoroutinefunction(function):
            coroutine = function(self.node, AsyncTransport(lease, workdir), **kwargs)
            return await asyncio.wait_for(coroutine, spec.timeout)
        call = functools.partial(function, self.node, BlockingTransport(lease, workdir), **kwargs)
        future = asyncio.get_running_loop().run_in_executor(_POOL, call)
        return await asyncio.wait_for(future, spec.timeout)

    def _failed(self, spec: MonitorSpec, state: dict[str, Any], why: str) -> None:
        state["failures"] += 1
        if state.get("first_failure") is None:  # also a state written before it was kept
            state["first_failure"] = now()
        state["last_fault"] = why
        span = now() - state["first_failure"]
        self.node.add_log(
            "WARNING",
            f"monitor {spec.name} {why} ({state['failures']}/{spec.max_failures}, over "
            f"{span:.0f}/{FAULT_WINDOW:g} s); the job goes on",
        )
        if state["failures"] >= spec.max_failures and span >= FAULT_WINDOW:
            self._disable(
                spec.name, state, f"{state['failures']} failures in a row over {span:.0f} s: {why}"
            )
        return None

    def _disable(self, name: str, state: dict[str, Any], reason: str) -> None:
        if state.get("disabled"):
            return
        state["disabled"], state["disabled_reason"] = True, reason
        self.node.add_log("REPORT", f"monitor {name} disabled: {reason}")

    def _attach_outputs(self, name: str, outputs: dict[str, Any]) -> None:
        for key, value in outputs.items():
            self.process.out(f"monitor_outputs.{name}_{key}", value)


async def run_monitors(process: CalcJob) -> bool:
    """After a poll: the job's monitors; True when one of them stopped the job, which is
    then cancelled and gone from the scheduler."""
    runner = get_runner()
    async with runner.lease_transport(process.computer) as lease:
        outcome = await MonitorRunner(process).run_cycle(lease)
    runner.poller(process.computer).monitors_done_at = time.monotonic()
    if outcome is None:
        return False
    name, result = outcome
    assert process.node is not None
    process.node.set_attribute(
        attr.STOPPED_BY_MONITOR,
        {
            "name": name,
            "message": result.message,
            "time": time.time(),
            "retrieve": result.retrieve or result.parse,
            "parse": result.parse,
            "override_exit_code": result.override_exit_code,
        },
    )
    process.report(f"monitor {name} stops the job: {result.message}")
    await kill.cancel(process)
    await kill.wait_until_gone(process)
    return True
