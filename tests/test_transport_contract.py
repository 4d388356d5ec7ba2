"""The contract every registered transport keeps, built-in or from another package.

veglia.testing.contracts.TransportContract, run over every ``veglia.transports`` entry
point and ``veglia.testing.FakeTransport``: each is a complete, documented ``Transport``
subclass that refuses parameters it does not know, and behaves the same on every
transport this machine can open: ``core.local``, ``core.ssh`` on the loopback sshd
(skipped without it, failed under CI=true), and the fake, so a plugin tested against the
fake meets the same observable results as on a real computer. Another package's
transport is checked for its structure here; its own tests open it (docs/plugins.md).
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from veglia.plugins.transports.local import LocalTransport
from veglia.plugins.transports.ssh import SshTransport
from veglia.testing import FakeTransport
from veglia.testing.contracts import TransportContract
from veglia.transports import Transport


class TestTransports(TransportContract):
    entry_points = "*"
    others: ClassVar = {"veglia.testing.FakeTransport": FakeTransport}

    def open_transport(
        self, cls: type[Transport], folder: Path, request: pytest.FixtureRequest
    ) -> Iterator[Transport]:
        if cls is LocalTransport:
            with LocalTransport() as local:
                local.cwd = str(folder / "remote")
                local.makedirs(local.cwd)
                yield local
        elif cls is SshTransport:
            ssh = request.getfixturevalue("ssh_transport")  # skips without sshd, fails in CI
            home = request.getfixturevalue("services_env")["SSH_USER_HOME"]
            ssh.cwd = posixpath.join(home, f"veglia-contract-{uuid.uuid4().hex[:8]}")
            ssh.makedirs(ssh.cwd)
            yield ssh
            ssh.rmtree(ssh.cwd)
        else:
            yield from super().open_transport(cls, folder, request)
