"""Running a job's monitors after a scheduler poll, and keeping their state on the node.

Faults of a monitor are not faults of the job: a monitor that raises, hangs past its timeout
or returns something else than ``str | MonitorResult | None`` is retried at the next poll,
and disabled after ``max_failures`` such faults in a row that span at least
``FAULT_WINDOW`` seconds (so a fast poll does not disable it within a second). The first
fault is logged on the node in full (what it raised with its traceback), the ones after it
as one line per ``FAULT_LOG_INTERVAL`` counting them, and `veglia process show` names a
disabled monitor and why. A ``TransportError`` from a monitor's call is not counted against
it, but is logged as sparsely.

Monitors share fairly: each call runs on the lane of its entry point (``monitor_lanes``), so
a plugin whose calls hang holds only its own threads. A job's due monitors are called side
by side, and the cycle waits for them at most one poll interval (less when their timeouts
are shorter), so a hung call delays the job's other monitors by one interval at most, and
only in the cycle it started in. A call still running at the monitor's next turn is not
started again: the call in flight is looked at instead, and counts one fault for each
timeout it runs past.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import functools
import inspect
import json
import math
import posixpath
import time
import traceback
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from veglia.engine.calcjob import live_trace, monitor_lanes
from veglia.engine.calcjob.file_watch import (
    Known,
    links_in,
    requests_for,
    slices_from,
    watches_of,
)
from veglia.engine.calcjob.monitor_lanes import (
    THREADS_PER_LANE,
    lane_of,
    run_coroutine,
)
from veglia.engine.calcjob.monitors import MonitorResult, MonitorSpec, load_monitor, now
from veglia.engine.calcjob.owner import OwningJob
from veglia.engine.calcjob.runtime import CalcJobRuntime, FaultLog, MonitorCall
from veglia.engine.metrics import METRICS
from veglia.engine.runner import get_runner
from veglia.entry_points import loaded_version
from veglia.exceptions import MonitorError, MonitorTimeout, TransportError
from veglia.orm.attributes import MONITOR_PROVENANCE, MONITOR_STATE, MONITORS

if TYPE_CHECKING:
    from veglia.engine.transport_queue import TransportLease

__all__ = ["MonitorCall", "MonitorRunner", "MonitoredJob"]

#: Seconds a monitor's run of faults must span, besides counting ``max_failures``, before
#: it is disabled: a fault counts per poll, and polls may come every tenth of a second.
FAULT_WINDOW = 60.0
#: Seconds after which a monitor's ``last_call`` is written even when nothing else changed.
#: Only monitors with a ``minimum_poll_interval`` need it exact (and get it at every call):
#: writing a thousand jobs' states at every poll is what kept the engine from keeping up.
LAST_CALL_REFRESH = 60.0
#: Seconds between two log rows of one monitor's faults on a job: the first fault is written
#: in full, the ones after it as one line per interval counting them.
FAULT_LOG_INTERVAL = 60.0


@functools.lru_cache(maxsize=256)
def _takes_state(function: Any) -> bool:
    return "state" in inspect.signature(function).parameters


#: Frames of a monitor's traceback that are the engine's or the thread pool's, not its own.
_ENGINE_FRAMES = (
    __file__,
    monitor_lanes.__file__,
    concurrent.futures.__file__.rsplit("/", 1)[0],
    asyncio.__file__.rsplit("/", 1)[0],
)


def _traceback_of(exc: BaseException) -> str:
    """The traceback of what a monitor raised, from its own code on (without the frames of
    the thread or event loop that ran it)."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(_ENGINE_FRAMES)
    ]
    return "Traceback (most recent call last):\n" + "".join(
        traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    )


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

    def _submit(self, name: str, args: Any, kwargs: Any) -> Future[Any]:
        # From a monitor's lane thread: the connection's executor takes calls from any thread.
        executor = self._lease._entry.executor
        return executor.submit(self._in_connection_thread, name, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._lease.transport, name)
        return self._wrap(name) if callable(attribute) else attribute


class BlockingTransport(_JobTransport):
    """For synchronous monitors (running on their lane): calls block until done."""

    def _wrap(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._submit(name, args, kwargs).result()

        return call


class AsyncTransport(_JobTransport):
    """For ``async def`` monitors (running on their lane's own event loop): every call is
    awaited."""

    def _wrap(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.wrap_future(self._submit(name, args, kwargs))

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


class MonitoredJob(OwningJob, Protocol):
    """What the runner uses of the :class:`~veglia.engine.calcjob.process.CalcJob` whose
    monitors it runs (which imports this module)."""

    @property
    def runtime(self) -> CalcJobRuntime: ...

    def out(self, output_port: str, value: Any) -> None: ...


def _acts(call: MonitorCall) -> bool:
    """Whether a finished call's answer stops the job (or switches monitors off)."""
    if call.overruns or call.future.cancelled() or call.future.exception() is not None:
        return False
    return isinstance(call.future.result(), str | MonitorResult)


class MonitorRunner:
    """One cycle of a job's monitors."""

    def __init__(self, process: MonitoredJob) -> None:
        self.process = process
        assert process.node is not None
        self.node = process.node
        #: This cycle's watch_files monitors, their file reads (by monitor name), and
        #: declarations that are broken.
        self._watched: set[str] = set()
        self._answers: dict[str, Any] | None = {}
        self._bad_watch: dict[str, str] = {}
        self._functions: dict[str, Any] = {}
        #: The job's live trace as of this cycle's read (None when it has none).
        self._trace: live_trace.LiveTrace | None = None

    def _specs(self) -> list[MonitorSpec]:
        """The job's monitors, read once per process: they are fixed at submission."""
        runtime = self.process.runtime
        if runtime.monitor_specs is None:
            data = self.node.get_attribute(MONITORS, [])
            runtime.monitor_specs = [MonitorSpec(**each) for each in data]
        return runtime.monitor_specs

    def seconds_until_due(self) -> float | None:
        """Seconds until one of the job's monitors is next due, for a job that may wait
        dehydrated until then (see ``CalcJob.dehydrate_if_idle``); ``math.inf`` when all
        are switched off. None when one is due at every poll (it has no
        ``minimum_poll_interval``) or a call is still in flight."""
        if self.calls():
            return None
        states: dict[str, dict[str, Any]] = self.node.get_attribute(MONITOR_STATE, {})
        soonest = math.inf
        for spec in self._specs():
            state = states.get(spec.name) or _fresh_state(spec)
            if state["disabled"]:
                continue
            if not spec.minimum_poll_interval:
                return None
            last = state.get("last_call")
            soonest = min(soonest, (last + spec.minimum_poll_interval - now()) if last else 0.0)
        return soonest

    def calls(self) -> dict[str, MonitorCall]:
        """The job's monitor calls in flight, by monitor name (they live with the process:
        a call may outlive its cycle)."""
        return self.process.runtime.monitor_calls

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
        if spec.name not in self.process.runtime.versions_checked:
            self.process.runtime.versions_checked.add(spec.name)
            self._record_version(spec)
        return function

    def _record_version(self, spec: MonitorSpec) -> None:
        """The monitor's provenance names the version of its package whose code this
        process runs: a plugin upgraded after the job's submission (a daemon restarted onto
        it), or under a daemon that still runs the old code, is not what the submission read."""
        running = loaded_version("monitors", spec.entry_point)
        recorded: dict[str, Any] = self.node.get_attribute(MONITOR_PROVENANCE, {})
        mine = recorded.get(spec.name) or {}
        if running is None or mine.get("version") == running:
            return
        updated = {**recorded, spec.name: {**mine, "version": running}}
        self.node.set_attribute(MONITOR_PROVENANCE, updated)
        self.node.add_log(
            "REPORT",
            f"monitor {spec.name} runs version {running} of its package here "
            f"({mine.get('version') or 'none'} was recorded before)",
        )

    def _due(self, specs: list[MonitorSpec], states: dict[str, Any]) -> list[Any]:
        """(spec, state) of the monitors to call this cycle, in call order: not those
        switched off, called too recently, or whose last call still runs."""
        due = []
        calls = self.calls()
        for spec in specs:
            state = states[spec.name]
            if state["disabled"] or spec.name in calls:
                continue
            interval = spec.minimum_poll_interval
            if interval and state["last_call"] and now() - state["last_call"] < interval:
                continue
            due.append((spec, state))
        return due

    async def _read_watched(
        self, due: list[Any], trace_reads: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The answers to the file reads of the due ``watch_files`` monitors, by monitor
        name, read with the other jobs' in one call; None when the read failed. The live
        trace's reads (``trace_reads``) go in the same call, and their answers on the node."""
        workdir = self.node.remote_workdir or "/"
        counts: list[tuple[str, int]] = []
        requests: list[dict[str, Any]] = list(trace_reads)
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
            names = ", ".join(name for name, _ in counts) or "live trace"
            self.node.add_log("WARNING", f"monitor {names}: reading the files failed: {exc}")
            return None
        if trace_reads:
            self.process.runtime.live_trace.take(answers[: len(trace_reads)])
        by_name, start = {}, len(trace_reads)
        for name, count in counts:
            by_name[name] = answers[start : start + count]
            start += count
            self._report_links(name, by_name[name], workdir)
        return by_name

    def _report_links(self, name: str, answers: list[Any], workdir: str) -> None:
        """Say once per job and link that a watched file was not read for a link on its way."""
        reported = self.process.runtime.links_reported
        for path, link in links_in(answers).items():
            if (name, link) not in reported:
                reported.add((name, link))
                self.node.add_log(
                    "WARNING",
                    f"monitor {name}: {posixpath.relpath(path, workdir)} is not read: {link} "
                    "is a link, and veglia follows no link in a job's folder",
                )

    async def run_cycle(
        self, lease: TransportLease, trace_reads: list[dict[str, Any]] | None = None
    ) -> tuple[str, MonitorResult] | None:
        """Call the monitors that are due; return (name, result) of the one that stops the
        job. ``trace_reads``: the job's live trace to read first, in the same call."""
        specs = self._specs()
        states: dict[str, dict[str, Any]] = self.node.get_attribute(MONITOR_STATE, {})
        for spec in specs:
            states.setdefault(spec.name, _fresh_state(spec))
        before = _what_is_kept(states, specs)
        last_write = max((r.get("last_call") or 0 for r in states.values()), default=0)
        # One poll interval from now: the longest this cycle waits for its monitors.
        until = time.monotonic() + get_runner().poller(self.process.computer).interval
        due = self._due(specs, states)
        self._answers = await self._read_watched(due, trace_reads or [])
        self._trace = self.process.runtime.live_trace.current()
        started = []
        for spec, state in due:
            if self._answers is None and spec.name in self._watched:
                continue  # its files could not be read: not its fault, try at the next poll
            state["last_call"] = now()
            self._start(spec, lease, state)
            started.append(spec.name)
        await self._wait(specs, started, until)
        outcome = None
        for spec in specs:
            state = states[spec.name]
            if state["disabled"]:
                self._forget(spec.name)
                continue
            result = self._answer(spec, state)
            if result is None:
                continue
            state["last_result"] = {"action": result.action, "message": result.message}
            if result.outputs:
                self._attach_outputs(spec.name, result.outputs)
            if result.action == "disable-self":
                self._disable(spec.name, state, result.message or "disabled itself")
                self._forget(spec.name)
                continue
            if result.action == "disable-all":
                for name, other in states.items():
                    self._disable(name, other, f"disabled by {spec.name}: {result.message}")
                    self._forget(name)
                break
            outcome = (spec.name, result)
            break  # the first result that acts wins this cycle
        if now() - last_write >= LAST_CALL_REFRESH or _what_is_kept(states, specs) != before:
            self.node.set_attribute(MONITOR_STATE, states)
        return outcome

    def _start(self, spec: MonitorSpec, lease: TransportLease, state: dict[str, Any]) -> None:
        """Hand the monitor's call to its entry point's lane (a fault found before it runs
        is its answer at once)."""
        METRICS.monitor_calls += 1
        data = copy.deepcopy(state["data"])  # the lane's thread works on its own copy
        files: Known | None = None
        try:
            function = self._load(spec)
            kwargs = dict(spec.kwargs)
            if _takes_state(function):
                kwargs["state"] = data
            if live_trace.takes_trace(function):
                kwargs["trace"] = self._trace
            workdir = self.node.remote_workdir or "/"
            if spec.name in self._bad_watch:
                raise MonitorError(self._bad_watch[spec.name])
            if self._answers and spec.name in self._answers:
                known = state.get("files", {})
                answers = self._answers[spec.name]
                kwargs["files"], files = slices_from(function, spec.kwargs, workdir, known, answers)
            if inspect.iscoroutinefunction(function):
                transport: _JobTransport = AsyncTransport(lease, workdir)
                make = functools.partial(function, self.node, transport, **kwargs)
                call = functools.partial(run_coroutine, make, spec.timeout)
            else:
                transport = BlockingTransport(lease, workdir)
                call = functools.partial(function, self.node, transport, **kwargs)
            future = lane_of(spec.entry_point).submit(call)
        except Exception as exc:
            future = Future()
            future.set_exception(exc)
        self.calls()[spec.name] = MonitorCall(future, time.monotonic(), spec.timeout, data, files)

    async def _wait(self, specs: list[MonitorSpec], started: list[str], until: float) -> None:
        """Wait for the calls started this cycle until the first answer that acts, in call
        order, is known, or they are all done, or ``until`` comes, or their timeouts pass.
        A call still running then is looked at in a later cycle, so a monitor that hangs
        delays the others by one poll interval at most, and only this once."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def woken(_: Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(wake.set)

        calls = self.calls()
        for name in started:
            calls[name].future.add_done_callback(woken)
        while True:
            wake.clear()
            at = time.monotonic()
            waited = [calls[name] for name in started if name in calls]
            waited = [c for c in waited if not c.future.done() and not c.overdue(at)]
            if not waited or self._decided(specs, set(started), at):
                return
            ends = [c.started + (c.overruns + 1) * c.timeout for c in waited]
            left = min(until, *ends) - at
            if left <= 0:
                return
            try:
                await asyncio.wait_for(wake.wait(), left)
            except asyncio.TimeoutError:
                return

    def _decided(self, specs: list[MonitorSpec], started: set[str], at: float) -> bool:
        """Whether the answer that acts first in call order is in: no call before it is
        still worth waiting for."""
        calls = self.calls()
        for spec in specs:
            call = calls.get(spec.name)
            if call is None:
                continue
            if not call.future.done():
                if spec.name in started and not call.overdue(at):
                    return False
                continue
            if _acts(call):
                return True
        return False

    def forget_calls(self) -> None:
        """The job ends: its monitors' calls still waiting for a thread never start."""
        for name in list(self.calls()):
            self._forget(name)

    def _forget(self, name: str) -> None:
        """Drop the monitor's call in flight: one still waiting for a thread never starts;
        one running keeps its thread until it returns, and its answer is not used."""
        call = self.calls().pop(name, None)
        if call is not None:
            call.future.cancel()

    def _answer(self, spec: MonitorSpec, state: dict[str, Any]) -> MonitorResult | None:
        """What the monitor's call in flight answered, once it is done or overdue; its
        faults counted."""
        calls = self.calls()
        call = calls.get(spec.name)
        if call is None:
            return None
        at = time.monotonic()
        if not call.future.done():
            if not call.overdue(at):
                return None  # it still has time: looked at again at the next cycle
            if call.future.cancel():  # never started: its lane's threads all still run
                del calls[spec.name]
                self._failed(
                    spec,
                    state,
                    f"waited {spec.timeout:g} s for a thread: all {THREADS_PER_LANE} threads "
                    f"of {spec.entry_point} still run earlier calls",
                )
                return None
            call.overruns += 1  # it keeps its thread; it is not started again meanwhile
            if call.overruns == 1:
                self._failed(spec, state, f"timed out after {spec.timeout:g} s")
                return None
            self._failed(
                spec,
                state,
                f"still running after {at - call.started:.0f} s (timeout {spec.timeout:g} s); "
                "it is not called again until it returns",
            )
            return None
        del calls[spec.name]
        if call.overruns:
            return None  # it came back late: each timeout it ran past was counted
        try:
            result = call.future.result()
        except TransportError as exc:  # not counted against the monitor, but logged as sparsely
            self._log_fault(
                spec.name, f"transport failed: {exc}", "(not counted as its fault); the job goes on"
            )
            return None
        except MonitorTimeout:
            self._failed(spec, state, f"timed out after {spec.timeout:g} s")
            return None
        except Exception as exc:
            state["data"] = call.data
            self._failed(spec, state, f"raised {type(exc).__name__}: {exc}", _traceback_of(exc))
            return None
        state["data"] = call.data
        if call.files is not None:  # seen without fault: the next cycle reads on from here
            state["files"] = call.files
        if result is None:
            state["failures"], state["first_failure"] = 0, None
            return None
        if isinstance(result, str):
            result = MonitorResult(message=result)
        if not isinstance(result, MonitorResult):
            self._failed(
                spec,
                state,
                f"returned {type(result).__name__}, not a message, a MonitorResult or None",
            )
            return None
        state["failures"], state["first_failure"] = 0, None
        return result

    def _failed(
        self, spec: MonitorSpec, state: dict[str, Any], why: str, traceback_text: str = ""
    ) -> None:
        state["failures"] += 1
        if state.get("first_failure") is None:  # also a state written before it was kept
            state["first_failure"] = now()
        state["last_fault"] = why
        span = now() - state["first_failure"]
        failures = state["failures"]
        self._log_fault(
            spec.name,
            why,
            f"({failures} {'fault' if failures == 1 else 'faults'} in a row over {span:.0f} s; "
            f"disabled after {spec.max_failures} in a row over {FAULT_WINDOW:g} s); "
            "the job goes on",
            traceback_text,
        )
        if state["failures"] >= spec.max_failures and span >= FAULT_WINDOW:
            self._disable(
                spec.name, state, f"{state['failures']} failures in a row over {span:.0f} s: {why}"
            )
            self._forget(spec.name)
        return None

    def _log_fault(self, name: str, why: str, count: str, traceback_text: str = "") -> None:
        """Write the monitor's fault (or transport failure) on the node, at most once per
        FAULT_LOG_INTERVAL: the first in full (with the monitor's traceback, shown by
        `veglia process report`), then one line saying how many came since and the last."""
        logs = self.process.runtime.fault_logs
        at = time.monotonic()
        seen = logs.get(name)
        if seen is not None and at - seen.written < FAULT_LOG_INTERVAL:
            seen.unwritten += 1
            seen.last = why
            return
        if seen is None or not seen.unwritten:
            first = {"traceback": traceback_text} if seen is None and traceback_text else {}
            self.node.add_log("WARNING", f"monitor {name} {why} {count}", **first)
        else:
            self.node.add_log(
                "WARNING",
                f"monitor {name} faulted again {seen.unwritten + 1} times in the last "
                f"{at - seen.written:.0f} s, last: {why} {count}",
            )
        logs[name] = FaultLog(written=at)

    def _disable(self, name: str, state: dict[str, Any], reason: str) -> None:
        if state.get("disabled"):
            return
        state["disabled"], state["disabled_reason"] = True, reason
        self.node.add_log("REPORT", f"monitor {name} disabled: {reason}")

    def _attach_outputs(self, name: str, outputs: dict[str, Any]) -> None:
        for key, value in outputs.items():
            self.process.out(f"monitor_outputs.{name}_{key}", value)
