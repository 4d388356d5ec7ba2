"""database blobs in chunks, with the time they were written

A blob of the database repository was one row holding its whole content: PostgreSQL's
``bytea`` holds 1 GB at most, and the content went through memory whole. Its content now
lies in ``repository_chunks``, 4 MiB a row; the blob's row keeps its size, its count of
chunks and when it was written (``veglia storage maintain`` frees only unreferenced blobs
older than its grace period). Blobs already stored are moved one at a time, so the migration
holds one blob in memory at most; their time is the migration's.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05 22:00:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CHUNK_SIZE = 4 * 1024 * 1024


def _now() -> sa.ColumnElement[Any]:
    """The database's clock in epoch seconds."""
    if op.get_bind().dialect.name == "postgresql":
        return sa.func.extract("epoch", sa.func.clock_timestamp())
    return (sa.func.julianday("now") - 2440587.5) * 86400.0


def upgrade() -> None:
    op.create_table(
        "repository_chunks",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("written", sa.Float(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", "seq", name=op.f("pk_repository_chunks")),
    )
    with op.batch_alter_table("repository_blobs") as batch_op:
        batch_op.add_column(sa.Column("chunks", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("written", sa.Float(), nullable=True))

    bind = op.get_bind()
    blobs = sa.table(
        "repository_blobs",
        sa.column("sha256", sa.String),
        sa.column("content", sa.LargeBinary),
        sa.column("chunks", sa.Integer),
        sa.column("written", sa.Float),
    )
    chunks = sa.table(
        "repository_chunks",
        sa.column("sha256", sa.String),
        sa.column("seq", sa.Integer),
        sa.column("content", sa.LargeBinary),
        sa.column("written", sa.Float),
    )
    now = bind.scalar(sa.select(_now()))
    for sha256 in list(bind.scalars(sa.select(blobs.c.sha256))):
        query = sa.select(blobs.c.content).where(blobs.c.sha256 == sha256)
        content = bytes(bind.execute(query).scalar_one())
        pieces = [content[i : i + CHUNK_SIZE] for i in range(0, len(content), CHUNK_SIZE)]
        for seq, piece in enumerate(pieces):
            bind.execute(chunks.insert().values(sha256=sha256, seq=seq, content=piece, written=now))
        bind.execute(
            blobs.update().where(blobs.c.sha256 == sha256).values(chunks=len(pieces), written=now)
        )

    with op.batch_alter_table("repository_blobs") as batch_op:
        batch_op.alter_column("chunks", existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column("written", existing_type=sa.Float(), nullable=False)
        batch_op.drop_column("content")


def downgrade() -> None:
    with op.batch_alter_table("repository_blobs") as batch_op:
        batch_op.add_column(sa.Column("content", sa.LargeBinary(), nullable=True))
    bind = op.get_bind()
    blobs = sa.table(
        "repository_blobs", sa.column("sha256", sa.String), sa.column("content", sa.LargeBinary)
    )
    chunks = sa.table(
        "repository_chunks",
        sa.column("sha256", sa.String),
        sa.column("seq", sa.Integer),
        sa.column("content", sa.LargeBinary),
    )
    for sha256 in list(bind.scalars(sa.select(blobs.c.sha256))):
        pieces = bind.scalars(
            sa.select(chunks.c.content).where(chunks.c.sha256 == sha256).order_by(chunks.c.seq)
        )
        content = b"".join(bytes(piece) for piece in pieces)
        bind.execute(blobs.update().where(blobs.c.sha256 == sha256).values(content=content))
    with op.batch_alter_table("repository_blobs") as batch_op:
        batch_op.alter_column("content", existing_type=sa.LargeBinary(), nullable=False)
        batch_op.drop_column("written")
        batch_op.drop_column("chunks")
    op.drop_table("repository_chunks")
