"""Every threshold of the context lifecycle, in one validated, frozen place.

Thresholds are fractions of the window of the model actually called on a request,
never token counts fixed when the agent is built: a policy written for a 200k model
keeps working after a switch to an 8k one. A bad value fails at construction, with
a message that names the field, the value and the fix, instead of misbehaving
hours into a session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxwarden.errors import PolicyError


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPolicy:
    """Thresholds of admit, clip and fold, and the gauge bands.

    Build a variant with `policy.replace(field=value)`; the result is validated again.
    """

    # --- window -------------------------------------------------------------
    window: int | None = None
    """Window in tokens for every call. `None` reads it from the model called
    (`profile["max_input_tokens"]`, else a local model's loaded context)."""

    warn_at: float = 0.70
    """Gauge turns `warn` from this share of the window."""

    critical_at: float = 0.90
    """Gauge turns `critical` from this share of the window."""

    # --- admit --------------------------------------------------------------
    skills_index_max_chars: int = 8_000
    """Cap on the rendered skills index; past it one line says how many were omitted."""

    memory_index_max_chars: int = 8_000
    """Cap on the `MEMORY.md` index placed in the system prompt."""

    instruction_file_max_chars: int = 4_000
    """Cap on one `AGENTS.md` instruction file."""

    instructions_max_chars: int = 12_000
    """Cap on all instruction files together."""

    # --- clip: arrival ---------------------------------------------------------
    render_terminal: bool = True
    """A tool result holding carriage returns, backspaces or escape codes enters the thread as a terminal shows it
    (progress frames collapsed, colour codes gone); its raw bytes stay in a file (`recall(part="raw")`)."""

    render_tail_max_bytes: int = 262_144
    """Cap on a rendered result: past it, its head (an eighth of this) and a tail of this many bytes are kept, with
    a marker saying how much was cut and how to get the raw output back."""

    render_exclude_tools: tuple[str, ...] = ()
    """Tools whose results are never rendered (kept byte for byte, escape codes and all)."""

    render_tools: Mapping[str, bool | int] = field(default_factory=dict)
    """Per-tool override: `True` renders that tool's results even with `render_terminal=False`, `False` never,
    a number renders them with that tail cap in bytes."""

    # --- clip ---------------------------------------------------------------
    evict_max_tokens: int = 20_000
    """A tool result larger than this (or than `evict_window_share`) goes to a file at arrival."""

    evict_window_share: float = 0.10
    """Eviction threshold as a share of the window; the smaller of the two applies."""

    clear_at: float = 0.60
    """Old tool results are cleared from the model's view once a call would pass this share."""

    clear_to: float = 0.30
    """One clearing batch goes down to this share, so the cached prefix moves rarely. A batch seldom reaches it on a
    small window, where the task, the summary and the gists take most of it; on a large one, a deep batch is read from
    the cache for longer before the next one."""

    keep_tool_results: int = 1
    """The newest tool results that clearing never touches (with any kept, all results of the newest step stay).
    Older ones leave with a gist of their distinctive lines, so by default only the newest step is held whole."""

    clear_exclude_tools: tuple[str, ...] = ()
    """Tools whose results are never cleared (for example an attempt log)."""

    clip_tool_args: bool = True
    """Clearing also clips large tool-call arguments in older turns."""

    clear_call_text: bool = True
    """A call whose every result is cleared leaves its text out of the view too: the reasoning about a result goes
    with it (the result's gist keeps its distinctive lines); the call stays, and `recall(part="text")` returns it."""

    clip_args_min_tokens: int = 64
    """Tool-call arguments at least this large are clipped in older turns: about what the pointer and the first line
    that replace them cost, so every argument clipped frees tokens on each later call (a script or a patch sent as a
    command, not the one-line commands that say what each result came from)."""

    clear_min_batch_share: float = 0.10
    """A clearing batch that would free less than this share of the window waits (the cached prefix
    stays put) until it can, or until the call passes the fold threshold."""

    gist_share: float = 0.25
    """A cleared result keeps verbatim lines worth up to this share of its tokens (see `gist_max_tokens`)."""

    gist_max_tokens: int = 400
    """Cap on the verbatim lines a cleared result keeps; 0 leaves only the one-line pointer."""

    gist_window_share: float | None = None
    """A further cap on each gist: this share of the window of the model called (`None`: none). Small windows get
    small gists; the cost-first preset sets it, so its masked results keep a few lines without folding more often."""

    mask_after_turns: int | None = None
    """Cost-first: mask tool results older than the newest N turns, when that pays before clearing (`clip.mask`)."""

    # --- fold ---------------------------------------------------------------
    summarize_at: float = 0.85
    """Older turns are folded into a summary once a call, after clearing, would pass this share."""

    fold_keep_share: float = 0.10
    """The newest turns kept verbatim by a fold (at least the last complete turn)."""

    fold_facts_share: float = 0.10
    """Cap on a summary's facts section (user messages, files written, failures, lines used), as a share
    of the window; past it the oldest facts go first, the latest user message never."""

    fold_min_saving: float = 0.10
    """A fold saving less than this share of the call counts as unproductive (a prepared one is not made at all)."""

    fold_regrow_share: float = 0.10
    """After an unproductive fold, no new fold until the thread grew by this share of the window."""

    summarizer_retries: int = 1
    """Retries of the summarizer model before the deterministic summary is used."""

    summarizer_timeout: float | None = 120.0
    """Seconds one summarizer call may take before it counts as failed (`None`: no limit)."""

    summarize_in_place: bool = True
    """When no summarizer is given (the agent's model summarizes), a fold asks for its summary by sending the call
    the model last received, with the instruction appended, so the provider bills it from its prompt cache; `False`
    sends a transcript of the folded turns instead (for a provider without prompt caching)."""

    fold_prepare_ahead: float = 0.15
    """Once a call passes `summarize_at` minus this share, the next fold's summary is prepared in the background,
    so the fold applies it at once instead of waiting for the summarizer; 0 prepares nothing ahead."""

    gauge_notes: bool = True
    """When a call's gauge rises to `warn` or `critical`, a short note after the newest message tells the model how
    full its window is, what ctxwarden does next, and what it can do (search with `recall`, compact)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "clear_exclude_tools", _names(self.clear_exclude_tools))
        object.__setattr__(self, "render_exclude_tools", _names(self.render_exclude_tools, "render_exclude_tools"))
        object.__setattr__(self, "render_tools", _overrides(self.render_tools))
        _check(self)

    @classmethod
    def cost_first(cls, mask_after_turns: int = 3, **changes: Any) -> ContextPolicy:
        """The cost-first preset, for those who pay per token more than they need recall.

        Results and large arguments older than the newest `mask_after_turns` turns are masked
        while clearing is far enough off for that to pay for its cache miss (`clip.mask`), each
        result keeping a small gist (at most 0.3% of the window, and 150 tokens);
        clearing runs from 25% down to 12%, and folding from 40% keeps 5% verbatim with a facts
        section of at most 5% of the window. A fold's facts keep the lines of the results it folds, so
        folding early costs little of what the agent comes back for, and a long view of masked turns
        costs on every call; but a fold is made only when it frees at least 35% of the call
        (`fold_min_saving`), so on a small window, where the task and the tools take a large share,
        folds wait until they free that much instead of coming every few steps.
        """
        preset: dict[str, Any] = {
            "clear_at": 0.25,
            "clear_to": 0.12,
            "summarize_at": 0.40,
            "fold_keep_share": 0.05,
            "fold_min_saving": 0.35,
            "gist_max_tokens": 150,
            "gist_window_share": 0.003,
            "fold_facts_share": 0.05,
        }
        return cls(mask_after_turns=mask_after_turns, **(preset | changes))

    def replace(self, **changes: Any) -> ContextPolicy:
        """A copy with `changes` applied, validated like a new policy."""
        return dataclasses.replace(self, **changes)

    def evict_threshold(self, window: int) -> int:
        """Tokens above which a tool result is evicted at arrival, for this window."""
        return min(self.evict_max_tokens, max(1, int(window * self.evict_window_share)))

    def render_cap(self, tool: str) -> int | None:
        """The tail cap in bytes for rendering `tool`'s results, or `None` when they are not rendered."""
        override = self.render_tools.get(tool)
        if override is False or (override is None and (not self.render_terminal or tool in self.render_exclude_tools)):
            return None
        return self.render_tail_max_bytes if override is True or override is None else int(override)

    def clear_threshold(self, window: int) -> int:
        """Tokens at which clearing fires for this window."""
        return int(window * self.clear_at)

    def fold_threshold(self, window: int) -> int:
        """Tokens at which folding fires for this window."""
        return int(window * self.summarize_at)

    def fold_regrow(self, window: int) -> int:
        """Tokens a thread grows by, on this window, before a fold that a hold put off is tried again."""
        return int(window * self.fold_regrow_share)


def _names(value: Iterable[str] | str, field_name: str = "clear_exclude_tools") -> tuple[str, ...]:
    if isinstance(value, str):
        raise PolicyError(
            f"ContextPolicy.{field_name}={value!r} is a single string; "
            f"pass a sequence of tool names, e.g. {field_name}=({value!r},)."
        )
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise PolicyError(
                f"ContextPolicy.{field_name} holds {name!r}; every entry must be a tool name (a non-empty str)."
            )
    return names


def _overrides(value: Mapping[str, bool | int]) -> Mapping[str, bool | int]:
    if not isinstance(value, Mapping):
        raise _fail(
            "render_tools",
            value,
            "is not a mapping",
            'pass a dict of tool name to True, False or bytes, e.g. {"bash": False}',
        )
    for name, setting in value.items():
        if not isinstance(name, str) or not name:
            raise _fail(
                "render_tools", dict(value), f"has key {name!r}", "key each entry by a tool name (a non-empty str)"
            )
        if not isinstance(setting, bool) and (not isinstance(setting, int) or setting < 1):
            raise _fail(
                "render_tools",
                dict(value),
                f"gives {name!r} the setting {setting!r}",
                "give each tool True (render), False (never render) or a tail cap in bytes >= 1",
            )
    return dict(value)  # a copy: a caller changing theirs later leaves the policy as it was


def _fail(field_name: str, value: object, rule: str, fix: str) -> PolicyError:
    return PolicyError(f"ContextPolicy.{field_name}={value!r} {rule}. Fix: {fix}.")


def _check_share(policy: ContextPolicy, name: str, *, upper_inclusive: bool = False) -> None:
    value = getattr(policy, name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(name, value, "is not a number", f"pass a share of the window such as {name}=0.5")
    ok = 0 < value <= 1 if upper_inclusive else 0 < value < 1
    if not ok:
        bound = "(0, 1]" if upper_inclusive else "(0, 1)"
        raise _fail(name, value, f"is outside {bound}", f"pass a share of the window, e.g. {name}=0.5")


def _check_count(policy: ContextPolicy, name: str, *, minimum: int) -> None:
    value = getattr(policy, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(name, value, "is not an int", f"pass a whole number >= {minimum}")
    if value < minimum:
        raise _fail(name, value, f"is below {minimum}", f"pass a whole number >= {minimum}")


def _check(policy: ContextPolicy) -> None:
    if policy.window is not None:
        _check_count(policy, "window", minimum=1)
    for name in ("warn_at", "clear_at", "clear_to", "summarize_at", "fold_keep_share", "fold_regrow_share"):
        _check_share(policy, name)
    for name in ("critical_at", "evict_window_share", "clear_min_batch_share", "fold_facts_share"):
        _check_share(policy, name, upper_inclusive=True)
    for name in (
        "skills_index_max_chars",
        "memory_index_max_chars",
        "instruction_file_max_chars",
        "instructions_max_chars",
        "evict_max_tokens",
        "clip_args_min_tokens",
        "render_tail_max_bytes",
    ):
        _check_count(policy, name, minimum=1)
    _check_count(policy, "keep_tool_results", minimum=0)
    _check_count(policy, "gist_max_tokens", minimum=0)
    _check_share(policy, "gist_share", upper_inclusive=True)
    if policy.gist_window_share is not None:
        _check_share(policy, "gist_window_share", upper_inclusive=True)
    _check_count(policy, "summarizer_retries", minimum=0)
    if policy.mask_after_turns is not None:
        _check_count(policy, "mask_after_turns", minimum=1)
    timeout = policy.summarizer_timeout
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0):
        raise _fail("summarizer_timeout", timeout, "is not a positive number of seconds", "pass e.g. 120, or None")
    if not isinstance(policy.fold_min_saving, int | float) or not 0 <= policy.fold_min_saving < 1:
        raise _fail("fold_min_saving", policy.fold_min_saving, "is outside [0, 1)", "pass e.g. 0.10")
    ahead = policy.fold_prepare_ahead
    if isinstance(ahead, bool) or not isinstance(ahead, int | float) or not 0 <= ahead < policy.summarize_at:
        raise _fail(
            "fold_prepare_ahead",
            ahead,
            f"is outside [0, summarize_at={policy.summarize_at!r})",
            "pass a share of the window below summarize_at, e.g. 0.15, or 0 to prepare nothing ahead",
        )
    if not isinstance(policy.render_terminal, bool):
        raise _fail("render_terminal", policy.render_terminal, "is not a bool", "pass render_terminal=True or False")
    if not isinstance(policy.gauge_notes, bool):
        raise _fail("gauge_notes", policy.gauge_notes, "is not a bool", "pass gauge_notes=True or gauge_notes=False")

    if policy.warn_at >= policy.critical_at:
        raise _fail(
            "warn_at",
            policy.warn_at,
            f"must be below critical_at={policy.critical_at!r}",
            "keep warn_at < critical_at, e.g. warn_at=0.7, critical_at=0.9",
        )
    if policy.clear_to >= policy.clear_at:
        raise _fail(
            "clear_to",
            policy.clear_to,
            f"must be below clear_at={policy.clear_at!r} (a clearing batch goes down to it)",
            "keep clear_to < clear_at, e.g. clear_to=0.3, clear_at=0.6",
        )
    if policy.clear_at >= policy.summarize_at:
        raise _fail(
            "clear_at",
            policy.clear_at,
            f"must be below summarize_at={policy.summarize_at!r} (clearing runs before folding)",
            "keep clear_at < summarize_at < 1, e.g. clear_at=0.6, summarize_at=0.85",
        )
    if policy.fold_keep_share >= policy.summarize_at:
        raise _fail(
            "fold_keep_share",
            policy.fold_keep_share,
            f"must be below summarize_at={policy.summarize_at!r} (a fold must leave room)",
            "keep fold_keep_share well below summarize_at, e.g. 0.10",
        )
    if policy.instruction_file_max_chars > policy.instructions_max_chars:
        raise _fail(
            "instruction_file_max_chars",
            policy.instruction_file_max_chars,
            f"exceeds instructions_max_chars={policy.instructions_max_chars!r}",
            "keep the per-file cap at or below the total cap",
        )


DEFAULT_POLICY = ContextPolicy()
"""The policy used when none is given."""


__all__ = ["DEFAULT_POLICY", "ContextPolicy"]
