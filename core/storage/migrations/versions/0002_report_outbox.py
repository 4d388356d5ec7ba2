"""report outbox

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 16:09:36.799891
"""

from __future__ import annotations

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Until 0011 this made the reporters' outbox (``report_outbox``, ``report_runs``). Those
    # tables belong to the plugin that reports now, made by its own migrations, which adopt
    # them where a release before 0011 made them: a new database gets none from the core.
    pass


def downgrade() -> None:
    pass
