"""codes can be hidden

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 20:30:00

``veglia code hide`` keeps a code out of ``veglia code list`` (as AiiDA's hidden codes):
the code stays, and jobs that ran with it keep their record of it. Codes stored before
this revision are shown.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("codes") as batch_op:
        batch_op.add_column(
            sa.Column("hidden", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("codes") as batch_op:
        batch_op.drop_column("hidden")
