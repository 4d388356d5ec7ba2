"""The database repository stores and reads blobs larger than memory allows, one chunk at a
time, and the migration to chunks keeps the blobs stored before it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import sqlalchemy as sa

from veglia.storage import StorageBackend

#: What the test's blob is: far more than the memory the storing process may grow by.
BLOB_SIZE = 300 * 1024 * 1024
GROWTH_ALLOWED = 100 * 1024 * 1024

_STORE_AND_READ = """
import hashlib, io, json, os, sys
from veglia.storage import StorageBackend

url, folder, size = sys.argv[1], sys.argv[2], int(sys.argv[3])


def peak() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


class Output(io.RawIOBase):
    '''A job's output as a stream of `size` bytes that never exists whole.'''

    def __init__(self) -> None:
        self.left = size
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.left, 1 << 20)
        piece = os.urandom(count)
        buffer[:count] = piece
        self.digest.update(piece)
        self.left -= count
        return count


backend = StorageBackend(url, folder, repository="database")
repository = backend.repository
repository.get_bytes(repository.put_bytes(b"warm the driver up")[0])
before = peak()
output = Output()
sha256, stored = repository.put_stream(io.BufferedReader(output, 1 << 20))
read = hashlib.sha256()
with repository.open(sha256) as handle:
    while piece := handle.read(1 << 20):
        read.update(piece)
print(json.dumps({
    "expected": output.digest.hexdigest(), "stored": sha256, "read": read.hexdigest(),
    "size": stored, "growth": peak() - before,
}))
"""


def test_a_blob_larger_than_memory_allows_is_stored_and_read_back(storage_url, tmp_path):
    backend = StorageBackend(storage_url, tmp_path / "repository", repository="database")
    backend.migrate()
    backend.close()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _STORE_AND_READ,
            storage_url,
            str(tmp_path / "repository"),
            str(BLOB_SIZE),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["stored"] == found["expected"] == found["read"]
    assert found["size"] == BLOB_SIZE
    assert found["growth"] < GROWTH_ALLOWED, f"grew by {found['growth'] >> 20} MiB"


@pytest.mark.parametrize("size", [0, 9 * 1024 * 1024 + 5])
def test_blobs_stored_before_the_chunks_migration_read_the_same_after_it(
    storage_url, tmp_path, size
):
    from alembic import command

    backend = StorageBackend(storage_url, tmp_path / "repository", repository="database")
    backend.migrate("0006")
    content = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    import hashlib

    sha256 = hashlib.sha256(content).hexdigest()
    with backend.engine.begin() as connection:
        connection.execute(
            sa.text("INSERT INTO repository_blobs (sha256, size, content) VALUES (:s, :n, :c)"),
            {"s": sha256, "n": size, "c": content},
        )
    assert backend.migrate() == ("0006", "0014")
    repository = backend.repository
    assert repository.get_bytes(sha256) == content
    repository.verify(sha256)
    assert list(repository) == [sha256]

    config = backend._alembic_config()
    with backend.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0006")
    with backend.engine.connect() as connection:
        assert connection.execute(sa.text("SELECT content FROM repository_blobs")).scalar() == (
            content
        )
    backend.close()
