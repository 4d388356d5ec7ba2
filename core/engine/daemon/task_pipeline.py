"""Queueing submitted processes on the broker without waiting for each confirmation.

:func:`~veglia.engine.daemon.broker_tasks.send_continue_task` waits until the broker has
confirmed the task (publisher confirms): a round trip to the communicator's thread and one
to RabbitMQ for every submission, the larger part of a submission's wall time in a loop of
them. Here a task is handed to the communicator's loop and the submission goes on; the
confirmations are looked at as later submissions come, and all of them at :func:`flush`
(at exit, before the communicator closes).

Nothing is lost in silence, and what a submission promises does not change: the node, its
checkpoint and its ``daemon`` flag are committed before its task is queued here.

- A task the broker did not confirm is sent again the waiting way (``send_continue_task``:
  retried while the broker restarts, then a ``BrokerError`` naming the process). That
  happens at the next submission, before it stores anything, or at :func:`flush`, where
  a failure is logged (at exit, nobody can catch it) with how to hand the process over.
- At most :data:`MAX_IN_FLIGHT` tasks wait for their confirmation: past that, a submission
  waits for the oldest.
- A submitter killed with tasks in flight leaves flagged processes no task names: the
  daemon's repair (``reconcile``) finds them and queues them again.
"""

from __future__ import annotations

import collections
import logging
import threading
import weakref
from typing import Any

from veglia.engine.daemon import broker_tasks
from veglia.exceptions import BrokerError
from veglia.manage import get_profile

__all__ = ["MAX_IN_FLIGHT", "TaskPipeline", "get_pipeline"]

LOGGER = logging.getLogger("veglia.broker")
#: Tasks that may wait for the broker's confirmation at once.
MAX_IN_FLIGHT = 256
#: Seconds to wait for the confirmation of one task before it is sent again the slow way.
CONFIRM_PATIENCE = 60.0


class TaskPipeline:
    """The tasks one Python process handed to the broker and not yet seen confirmed."""

    def __init__(self, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.max_in_flight = max_in_flight
        self._lock = threading.Lock()
        # (profile id, broker url, pk, the confirmation), oldest first.
        self._in_flight: collections.deque[tuple[str, str, int, Any]] = collections.deque()
        #: Communicators that have sent one task the waiting way: kiwipy opens its task
        #: queue on the first send, which two sends at once could both do.
        self._opened: weakref.WeakSet[Any] = weakref.WeakSet()

    def send(self, url: str, pk: int) -> None:
        """Queue the process's task; raise only when it cannot even be handed over."""
        profile = get_profile()
        with self._lock:
            other_profile = any(entry[0] != profile.id for entry in self._in_flight)
        if other_profile:  # a task sent again goes to the active profile's broker
            self._settle(block=True)
        try:
            communicator = broker_tasks._shared(profile)
        except Exception:
            broker_tasks.send_continue_task(url, pk)  # waits for the broker, or raises
            return
        if communicator not in self._opened:
            broker_tasks.send_continue_task(url, pk)
            self._opened.add(communicator)
            return
        try:
            # kiwipy's own way to its loop, without waiting for the result.
            confirmation = communicator._loop_scheduler.await_submit(
                communicator._communicator.task_send({"pid": pk}, no_reply=True)
            )
        except Exception:
            self._opened.discard(communicator)
            broker_tasks.send_continue_task(url, pk)
            return
        with self._lock:
            self._in_flight.append((profile.id, url, pk, confirmation))
        self._settle(block=False)

    def check(self) -> None:
        """Send again, the waiting way, each task the broker refused so far; a
        ``BrokerError`` when one cannot be handed over (before a new submission)."""
        self._settle(block=False)

    def flush(self) -> list[int]:
        """Wait for every confirmation; return the processes that could not be handed over
        (logged)."""
        return self._settle(block=True, raise_errors=False)

    def _settle(self, block: bool, raise_errors: bool = True) -> list[int]:
        lost: list[int] = []
        while True:
            with self._lock:
                if not self._in_flight:
                    return lost
                oldest = self._in_flight[0]
                must_wait = block or len(self._in_flight) > self.max_in_flight
                if not oldest[3].done() and not must_wait:
                    return lost
                self._in_flight.popleft()
            if self._confirmed(oldest[3]):
                continue
            failed = self._send_again(oldest[0], oldest[1], oldest[2], raise_errors)
            if failed is not None:
                lost.append(failed)

    @staticmethod
    def _confirmed(confirmation: Any) -> bool:
        try:
            confirmation.result(timeout=CONFIRM_PATIENCE)
        except Exception as exc:  # refused, unroutable, a closed connection, a timeout
            LOGGER.debug("a task was not confirmed (%s): sending it again", exc)
            return False
        return True

    def _send_again(self, profile_id: str, url: str, pk: int, raise_errors: bool) -> int | None:
        if get_profile().id != profile_id:  # its broker is not the active profile's
            LOGGER.error(
                "Process %d of another profile (id %s) is stored but its task was not "
                "confirmed by the broker: its daemon's repair queues it again, or `veglia "
                "process play %d` in that profile.",
                pk,
                profile_id,
                pk,
            )
            return pk
        try:
            broker_tasks.send_continue_task(url, pk)
        except BrokerError as exc:
            if raise_errors:
                raise
            LOGGER.error("%s", exc)
            return pk
        return None


_pipeline = TaskPipeline()
broker_tasks.before_close(_pipeline.flush)


def get_pipeline() -> TaskPipeline:
    """This Python process's pipeline of submitted tasks."""
    return _pipeline
