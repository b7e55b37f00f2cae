"""ContextPolicy: the DESIGN defaults, and construction-time validation that names field, value and fix."""

from __future__ import annotations

import dataclasses

import pytest

from ctxwarden import ContextPolicy, PolicyError, gauge_level


def test_defaults_are_the_documented_ones() -> None:
    policy = ContextPolicy()
    assert policy.window is None
    assert (policy.clear_at, policy.clear_to, policy.summarize_at) == (0.60, 0.30, 0.85)
    assert (policy.evict_max_tokens, policy.evict_window_share) == (20_000, 0.10)
    assert (policy.keep_tool_results, policy.clear_min_batch_share) == (1, 0.10)
    assert (policy.warn_at, policy.critical_at) == (0.70, 0.90)
    assert policy.memory_index_max_chars == 8_000
    assert (policy.instruction_file_max_chars, policy.instructions_max_chars) == (4_000, 12_000)
    assert policy.fold_min_saving == 0.10
    assert policy.mask_after_turns is None


def test_thresholds_follow_the_window() -> None:
    policy = ContextPolicy()
    assert policy.clear_threshold(200_000) == 120_000
    assert policy.fold_threshold(8_000) == 6_800
    # eviction takes the smaller of 20k tokens and 10% of the window
    assert policy.evict_threshold(1_000_000) == 20_000
    assert policy.evict_threshold(32_000) == 3_200


def test_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ContextPolicy().clear_at = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "field", "value_text", "fix_text"),
    [
        ({"clear_at": 0.9}, "clear_at", "0.9", "clear_at < summarize_at"),
        ({"clear_to": 0.7}, "clear_to", "0.7", "clear_to < clear_at"),
        ({"summarize_at": 1.2}, "summarize_at", "1.2", "share of the window"),
        ({"summarize_at": 0.5}, "clear_at", "0.6", "clear_at < summarize_at"),
        ({"window": 0}, "window", "0", ">= 1"),
        ({"window": 12.5}, "window", "12.5", "whole number"),
        ({"keep_tool_results": -1}, "keep_tool_results", "-1", ">= 0"),
        ({"warn_at": 0.95}, "warn_at", "0.95", "warn_at < critical_at"),
        ({"evict_max_tokens": 0}, "evict_max_tokens", "0", ">= 1"),
        ({"mask_after_turns": 0}, "mask_after_turns", "0", ">= 1"),
        ({"gist_window_share": 0}, "gist_window_share", "0", "share of the window"),
        ({"fold_keep_share": 0.9}, "fold_keep_share", "0.9", "below summarize_at"),
        ({"clear_at": True}, "clear_at", "True", "share of the window"),
        ({"instruction_file_max_chars": 20_000}, "instruction_file_max_chars", "20000", "total cap"),
    ],
)
def test_bad_values_name_field_value_and_fix(changes: dict, field: str, value_text: str, fix_text: str) -> None:
    with pytest.raises(PolicyError) as caught:
        ContextPolicy(**changes)
    message = str(caught.value)
    assert f"ContextPolicy.{field}={value_text}" in message
    assert "Fix:" in message
    assert fix_text in message
    assert isinstance(caught.value, ValueError)


def test_exclusions_must_be_a_sequence_of_names() -> None:
    assert ContextPolicy(clear_exclude_tools=["attempt_log"]).clear_exclude_tools == ("attempt_log",)
    with pytest.raises(PolicyError, match=r"clear_exclude_tools='attempt_log' is a single string"):
        ContextPolicy(clear_exclude_tools="attempt_log")
    with pytest.raises(PolicyError, match="non-empty str"):
        ContextPolicy(clear_exclude_tools=["ok", ""])


def test_replace_validates_again() -> None:
    policy = ContextPolicy().replace(window=8_000)
    assert policy.window == 8_000
    with pytest.raises(PolicyError, match="clear_at"):
        policy.replace(clear_at=0.95)


def test_cost_first_preset_masks_old_turns() -> None:
    policy = ContextPolicy.cost_first()
    assert policy.mask_after_turns == 3
    assert (policy.clear_at, policy.clear_to, policy.summarize_at, policy.fold_keep_share) == (0.25, 0.12, 0.40, 0.05)
    assert policy.fold_min_saving == 0.35  # a fold frees a third of the call, or waits until it can
    assert (policy.gist_max_tokens, policy.gist_window_share, policy.fold_facts_share) == (150, 0.003, 0.05)
    assert ContextPolicy.cost_first(5, window=8_000).mask_after_turns == 5
    assert ContextPolicy.cost_first(summarize_at=0.8).summarize_at == 0.8


@pytest.mark.parametrize(
    ("fraction", "level"),
    [(0.0, "ok"), (0.699, "ok"), (0.70, "warn"), (0.899, "warn"), (0.90, "critical"), (1.5, "critical")],
)
def test_gauge_bands(fraction: float, level: str) -> None:
    assert gauge_level(fraction) == level


def test_gauge_follows_policy_bands() -> None:
    policy = ContextPolicy(warn_at=0.5, critical_at=0.6)
    assert gauge_level(0.55, policy) == "warn"
    assert gauge_level(0.65, policy) == "critical"
