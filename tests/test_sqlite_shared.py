"""Shared SQLite files: a statement that meets another connection's lock is retried, not fatal."""

from __future__ import annotations

import sqlite3

import pytest

from ctxwarden.core.sqlite import retry_when_locked


class LockedFor:
    """A statement that finds the database locked `times` times, then runs."""

    def __init__(self, times: int, message: str = "database is locked") -> None:
        self.times, self.message, self.calls = times, message, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise sqlite3.OperationalError(self.message)
        return "ran"


def test_a_locked_statement_is_retried_until_it_runs() -> None:
    statement = LockedFor(3)
    assert retry_when_locked(statement) == "ran"
    assert statement.calls == 4


def test_a_lock_that_never_clears_raises_after_the_last_retry() -> None:
    statement = LockedFor(10)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        retry_when_locked(statement, retries=2)
    assert statement.calls == 3


def test_any_other_error_is_raised_at_once() -> None:
    statement = LockedFor(1, "no such table: checkpoints")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_when_locked(statement)
    assert statement.calls == 1
