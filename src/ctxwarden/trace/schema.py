"""The trace schema as documentation, read from a freshly migrated database.

`docs/trace.md` embeds this table; a test regenerates it and fails when they differ,
so the documented schema cannot drift from the migrations.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from ctxwarden.trace.migrations import MIGRATIONS, migrate

BEGIN = "<!-- schema: generated from ctxwarden.trace.migrations; do not edit by hand -->"
END = "<!-- schema: end -->"


def schema_markdown() -> str:
    """The `events` table, its indexes, the head record, the triggers and the migrations, as markdown."""
    with tempfile.TemporaryDirectory() as folder:
        db = sqlite3.connect(Path(folder) / "trace.sqlite", isolation_level=None)
        try:
            migrate(db)
            columns = db.execute("PRAGMA table_info(events)").fetchall()
            head = db.execute("PRAGMA table_info(events_head)").fetchall()
            indexes = db.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND sql IS NOT NULL"
            ).fetchall()
            triggers = db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name").fetchall()
        finally:
            db.close()
    lines = ["| column | type | required | default | key |", "|---|---|---|---|---|"]
    for _cid, name, type_, notnull, default, pk in columns:
        lines.append(
            f"| `{name}` | {type_} | {'yes' if notnull else 'no'} | {default or ''} | {'primary' if pk else ''} |"
        )
    lines.append("")
    lines.append(
        "Indexes: " + ", ".join(f"`{n}` ({sql.split('(', 1)[1].rstrip(')')})" for n, sql in sorted(indexes)) + "."
    )
    lines.append(
        "Head record `events_head`, one row: "
        + ", ".join(f"`{name}` {type_}" for _cid, name, type_, _nn, _default, _pk in head)
        + " (the last row appended; `one` is always 1)."
    )
    lines.append(
        "Triggers: "
        + ", ".join(f"`{n}`" for (n,) in triggers)
        + " (they refuse UPDATE, DELETE and REPLACE on `events`, refuse a row that does not follow the head,"
        " and let the head move only to the row appended last)."
    )
    lines.append("Migrations, in order: " + ", ".join(f"`{name}`" for name, _ in MIGRATIONS) + ".")
    return "\n".join(lines)


def section() -> str:
    return f"{BEGIN}\n{schema_markdown()}\n{END}"


__all__ = ["BEGIN", "END", "schema_markdown", "section"]
