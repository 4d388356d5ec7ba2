"""The fake node: a running job's node as a monitor sees it, in memory."""

from __future__ import annotations

import copy
from typing import Any

from veglia.orm import attributes as attr

__all__ = ["FakeNode"]


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
        result: dict[str, Any] = self.get_attribute(attr.OPTIONS, {})
        return result

    @property
    def remote_workdir(self) -> str | None:
        result: str | None = self.get_attribute(attr.REMOTE_WORKDIR)
        return result

    @property
    def job_id(self) -> str | None:
        result: str | None = self.get_attribute(attr.JOB_ID)
        return result

    @property
    def computer_label(self) -> str | None:
        result: str | None = self.get_attribute(attr.COMPUTER)
        return result

    @property
    def scheduler_state(self) -> str | None:
        result: str | None = self.get_attribute(attr.SCHEDULER_STATE)
        return result

    @property
    def last_job_info(self) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self.get_attribute(attr.LAST_JOB_INFO)
        return result

    @property
    def submitted_at(self) -> float | None:
        result: float | None = self.get_attribute(attr.SUBMITTED_AT)
        return result

    @property
    def started_at(self) -> float | None:
        result: float | None = self.get_attribute(attr.STARTED_AT)
        return result

    @property
    def similarity_key(self) -> str | None:
        result: str | None = self.get_attribute(attr.SIMILARITY_KEY)
        return result
