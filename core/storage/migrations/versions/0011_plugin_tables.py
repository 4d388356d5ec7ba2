"""the reporters' outbox leaves the core schema

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 14:30:00

``report_outbox`` and ``report_runs`` are now a plugin's own tables (the
``storage_migrations`` hook), made by that plugin's migrations, with a version table of its
own. Nothing is dropped: a database made by a release before this one keeps them, rows and
all, and the plugin's first migration adopts them as they are. This revision changes no
table; it marks the database as one this release migrated, so a release that still counts
those tables as the core's refuses it (newer schema) instead of using it.
"""

from __future__ import annotations

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
