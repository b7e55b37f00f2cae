"""Reference recall and probe recall: does the agent still see what it will use?

Cheaper views are only better if the agent keeps working, so the benchmark scores every
replayed view against the recorded session itself:

- **Reference recall.** Every recorded action (an assistant message: its text and its
  tool-call argument values) writes distinctive tokens. Those whose first appearance in
  the session was inside a tool output, and which the session had shown at most twice
  before, are the action's *references*: details the agent read and then used. A
  reference is recalled when the token is in the view the call received. Only verbatim
  lines count: a view line that is not, stripped, a line of the session itself (a
  placeholder's own words, a summary's prose) is left out of the search, so quoting
  lines helps and inventing digests does not. *Long-range* recall counts only
  references whose source output is three or more steps older than the action.
- **Task recall.** The same, for the tokens an action writes that the task (the first user
  message) showed first and the session had shown at most twice before: the names and paths
  of the issue the agent goes on to use. A strategy that shows less of the task, in part or
  only in a summary, is scored on what that loses; reference recall cannot see it, a task's
  tokens being the task's, not a tool output's.
- **Probe recall.** Right after every fold, fixed probes must be in the view verbatim:
  the path of every file written or edited before the fold, the latest user message,
  each line of the user's messages, and the error line of the latest failing command. A task
  past the facts cap is shown in part (`ctxwarden.core.task`): a probe of its text counts
  when the view holds the pointer that returns it whole (`TASK_POINTER`).
  The bench's summarizer knows nothing, so this measures what the fold itself keeps.

Both are computed from the same captured views as every other figure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage

from ctxwarden.core.text import message_text
from ctxwarden.fold.facts import error_line, written_paths
from ctxwarden.replay.recording import Recording

TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{5,}|\b\d{3,}\b|[\w.-]+/[\w./-]+")
"""The metric's own definition of a distinctive token (kept here so the mechanism can change without moving it)."""

TASK_POINTER = 'recall(part="task")'
"""What a task shown in part shows in place of the lines it leaves out (`ctxwarden.core.task.TASK_NOTE`): a probe of
the task's text counts when the view holds it, the whole task one call away."""

RARE = 2
"""A token shown in more earlier messages than this is common knowledge, not a reference."""

LONG_RANGE_STEPS = 3
"""A reference is long-range when its source output is at least this many steps before the action."""

TASK_SOURCE = 0
"""The source step of a token the task showed first: before every step's output."""


@dataclass(frozen=True, slots=True)
class Reference:
    token: str
    source_step: int
    """The step whose tool output first showed the token."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What must be in the view right after a fold, and why."""

    kind: str
    text: str
    in_task: bool = False
    """Whether the text is the task's (the first user message), which a fold may pin in part."""


@dataclass(slots=True)
class SessionIndex:
    """A recorded session, read once: references per action and the lines it contains."""

    references: dict[int, tuple[Reference, ...]]
    """By action step (1-based: the assistant message produced after `step - 1` steps)."""
    task_references: dict[int, tuple[str, ...]]
    """By action step: the tokens it writes that the task showed first (`TASK_SOURCE`)."""
    lines: frozenset[str]
    """Every stripped, non-empty line of every message of the session."""
    recording: Recording


@dataclass(slots=True)
class RecallCounts:
    """Counts for one replay; ratios are taken over sums, so they aggregate across sessions."""

    references: int = 0
    recalled: int = 0
    long_range: int = 0
    long_range_recalled: int = 0
    task_references: int = 0
    task_recalled: int = 0
    probes: int = 0
    probes_found: int = 0
    missed_probes: list[str] = field(default_factory=list)

    def add(self, other: RecallCounts) -> None:
        self.references += other.references
        self.recalled += other.recalled
        self.long_range += other.long_range
        self.long_range_recalled += other.long_range_recalled
        self.task_references += other.task_references
        self.task_recalled += other.task_recalled
        self.probes += other.probes
        self.probes_found += other.probes_found
        self.missed_probes.extend(other.missed_probes)

    @property
    def recall(self) -> float:
        return self.recalled / self.references if self.references else 1.0

    @property
    def long_range_recall(self) -> float:
        return self.long_range_recalled / self.long_range if self.long_range else 1.0

    @property
    def task_recall(self) -> float:
        return self.task_recalled / self.task_references if self.task_references else 1.0

    @property
    def probe_recall(self) -> float:
        return self.probes_found / self.probes if self.probes else 1.0


# --- the session ------------------------------------------------------------------
_INDEX: dict[int, SessionIndex] = {}


def index_session(recording: Recording) -> SessionIndex:
    """References of every action of `recording` and the set of its lines (cached per recording)."""
    hit = _INDEX.get(id(recording))
    if hit is not None and hit.recording is recording:
        return hit
    first: dict[str, int | None] = {}  # token -> step of the tool output that first showed it, None if not one
    seen: dict[str, int] = {}  # token -> how many messages contained it so far
    lines: set[str] = set()
    references: dict[int, tuple[Reference, ...]] = {}
    task_references: dict[int, tuple[str, ...]] = {}

    def show(text: str, source: int | None) -> None:
        lines.update(line.strip() for line in text.splitlines() if line.strip())
        for token in set(TOKEN.findall(text)):
            first.setdefault(token, source)
            seen[token] = seen.get(token, 0) + 1

    if recording.system_prompt:
        show(recording.system_prompt, None)
    step = 0
    for number, turn in enumerate(recording.turns):
        show(message_text(turn.user), TASK_SOURCE if number == 0 else None)
        for action in turn.steps:
            step += 1
            text = message_text(action)
            found, from_task = [], []
            for token in sorted(set(TOKEN.findall(text))):
                source = first.get(token)
                if source is None or seen.get(token, 0) > RARE:
                    continue
                if source == TASK_SOURCE:
                    from_task.append(token)
                else:
                    found.append(Reference(token, source))
            references[step] = tuple(found)
            task_references[step] = tuple(from_task)
            show(text, None)
            for call in action.tool_calls:
                show(recording.outputs.get(str(call["id"]), ""), step)
    index = SessionIndex(references, task_references, frozenset(lines), recording)
    if len(_INDEX) > 256:
        _INDEX.clear()
    _INDEX[id(recording)] = index
    return index


# --- the views --------------------------------------------------------------------
class VerbatimText:
    """The verbatim lines of a view, joined; per-message results are cached across calls."""

    def __init__(self, session_lines: frozenset[str]) -> None:
        self._lines = session_lines
        self._cache: dict[int, tuple[BaseMessage, str]] = {}

    def of(self, view: Sequence[BaseMessage]) -> str:
        return "\n".join(self._message(m) for m in view)

    def _message(self, message: BaseMessage) -> str:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        kept = "\n".join(line for line in message_text(message).splitlines() if line.strip() in self._lines)
        self._cache[id(message)] = (message, kept)
        return kept


def recall_counts(
    recording: Recording,
    calls: Iterable[tuple[int, Sequence[BaseMessage]]],
    folds_before: Sequence[int] = (),
) -> RecallCounts:
    """Score each `(steps replayed before the call, view)`; probes on the first call after each fold.

    `folds_before` holds, for each fold, how many calls had been made when it happened.
    A step called more than once (a retry after an overflow) is scored on its last call.
    """
    index = index_session(recording)
    verbatim = VerbatimText(index.lines)
    ordered = list(calls)
    last_call = {step: position for position, (step, _view) in enumerate(ordered)}
    out = RecallCounts()
    for position, (step, view) in enumerate(ordered):
        if last_call[step] != position:
            continue
        references = index.references.get(step + 1, ())
        from_task = index.task_references.get(step + 1, ())
        if not references and not from_task:
            continue
        text = verbatim.of(view)
        out.task_references += len(from_task)
        out.task_recalled += sum(token in text for token in from_task)
        for reference in references:
            hit = reference.token in text
            out.references += 1
            out.recalled += hit
            if step + 1 - reference.source_step >= LONG_RANGE_STEPS:
                out.long_range += 1
                out.long_range_recalled += hit
    for position in sorted(set(folds_before)):
        if position >= len(ordered):
            continue
        step, view = ordered[position]
        whole = "\n".join(message_text(m) for m in view)
        first = next((m for m in view if m.type != "system"), None)  # the pinned task, never a tool's output
        pointer = first is not None and TASK_POINTER in message_text(first)
        for probe in probes(recording, step):
            out.probes += 1
            if probe.text in whole or (probe.in_task and pointer):
                out.probes_found += 1
            else:
                out.missed_probes.append(f"step {step}: {probe.kind}: {probe.text[:80]!r}")
    return out


def probes(recording: Recording, step: int) -> list[Probe]:
    """What the view must show after a fold made once `step` steps were replayed."""
    found: list[Probe] = []
    users = []
    start = 0  # steps replayed before the turn began
    paths: dict[str, None] = {}
    failing: str | None = None
    for turn in recording.turns:
        if start > step:  # the turn begins after the call: its user message is not said yet
            break
        users.append(turn.user)
        for action in turn.steps[: step - start]:
            for path in written_paths(action):
                paths.setdefault(path, None)
            for call in action.tool_calls:
                line = error_line(recording.outputs.get(str(call["id"]), ""))
                if line is not None:
                    failing = line
        start += len(turn.steps)
    found.extend(Probe("written file", path) for path in paths)
    if users:
        latest = message_text(users[-1]).strip()
        found.append(Probe("latest user message", latest, in_task=len(users) == 1))
        for number, user in enumerate(users):
            lines = (line.strip() for line in message_text(user).splitlines())
            found.extend(Probe("user line", line, in_task=number == 0) for line in lines if line)
    if failing is not None:
        found.append(Probe("latest error line", failing))
    return found


def action_tokens(message: AIMessage) -> set[str]:
    """The distinctive tokens an action writes (for tests and reports)."""
    return set(TOKEN.findall(message_text(message)))


__all__ = [
    "TOKEN",
    "Probe",
    "RecallCounts",
    "Reference",
    "SessionIndex",
    "VerbatimText",
    "action_tokens",
    "index_session",
    "probes",
    "recall_counts",
]
