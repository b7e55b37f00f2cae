"""Gists: the few whole lines of a large output that an agent is likely to come back for.

When a result leaves the view (cleared, evicted at arrival, or folded with its turn) a one-line pointer keeps
it reachable but hides the one line the agent needed three steps later: the path a grep
found, the line number of a definition, the assertion that failed. A gist keeps a
bounded excerpt of the original instead, chosen line by line for that value:

- lines carrying distinctive tokens (identifiers of 6+ characters, numbers of 3+ digits,
  paths) that the thread had not shown before this output — each token counts once, for
  the first line chosen that carries it, so the gist covers many details, not one repeated;
- error, traceback and failing-test lines, test-run summaries and grep hits — and, first of all,
  the line that says why the output failed (its last failure line, the one a fold's facts quote
  for a failing command), so a cleared failure still shows its reason;
- declarations of a name the thread has not shown twice (`def`, `class`, or a method led by modifiers, as in
  `public void doRegister(URL url) {`), whose line numbers the next `goto`, `edit` or `sed -n` uses;
- the first and last lines, which say what the output is and how it ended.

Clearing quotes the gist in the result's placeholder, eviction in its preview, and a fold in
its facts section (`fold.facts.gist_lines`), so the lines stay in view whichever way the
result went.

Lines are chosen greedily by value per token until the budget is spent, then shown in
their original order, each run of omitted lines marked by a `…` line. A line is shown whole or not at all:
a gist never paraphrases, cuts or lists tokens. The choice depends only on the output
and on what the thread showed before it, both fixed once the output exists, so the same
message always gets the same bytes and a provider's prompt cache keeps hitting.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.text import TOKEN, is_failure

SUMMARY = re.compile(
    r"(=+ .*\b\d+ (passed|failed|errors?|skipped|xfailed|xpassed|warnings?)\b.*=+$)"
    r"|(^\d+ (passed|failed)\b)|(^Ran \d+ tests? in )|(^FAILED \(.*(failures|errors)=\d+)|(^OK( \(|$))"
    r"|(\b\d+ (tests?|examples?) (passed|failed|completed))|(^Tests?: +\d+)",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")


_SUMMARY_START = re.compile(
    r"\d+ (passed|failed)\b|Ran \d+ tests? in |FAILED \(.*(failures|errors)=\d+|OK( \(|$)|Tests?: +\d+", re.IGNORECASE
)
_SUMMARY_RULED = re.compile(
    r"=+ .*\b\d+ (passed|failed|errors?|skipped|xfailed|xpassed|warnings?)\b.*=+$", re.IGNORECASE
)
_SUMMARY_COUNTED = re.compile(r"\b\d+ (tests?|examples?) (passed|failed|completed)", re.IGNORECASE)
"""`SUMMARY`'s alternatives in three: those at a line's start, read at its start only, and the other two, each read
only when the line holds what it needs (an unanchored search tries every alternative at every character)."""


def summary_line(line: str) -> bool:
    """Whether `SUMMARY` matches `line`, read only when the line holds a digit or starts with `ok`, as every line
    it matches does, and each part only where it can: most lines are not summaries, and the whole pattern costs
    microseconds a line (a flood of error lines, each with a number, was read at 4 MB/s)."""
    if _DIGIT.search(line) is None and line[:2].lower() != "ok":
        return False
    if _SUMMARY_START.match(line) is not None:
        return True
    if "=" in line and _SUMMARY_RULED.search(line) is not None:
        return True
    folded = line.casefold()  # as the pattern reads case: `ſ` is an `s`
    return ("test" in folded or "example" in folded) and _SUMMARY_COUNTED.search(line) is not None


TRACEBACK_START = re.compile(r"^\s*Traceback \(most recent call last\):|^panic: |^Exception in thread ")
ERROR = re.compile(
    r"^E\s{2,}|\b(Error|Exception|FATAL|fatal|error|Failure|FAILURE|failed|FAILED|panic)\b[:\s]"
    r"|^\S+?:\d+(:\d+)?:\s*(error|warning|fatal)\b"
    r"|^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b",
)
_ERROR_START = re.compile(
    r"E\s{2,}|\S+?:\d+(:\d+)?:\s*(error|warning|fatal)\b|\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"
)
_ERROR_WORD = re.compile(r"\b(Error|Exception|FATAL|fatal|error|Failure|FAILURE|failed|FAILED|panic)\b[:\s]")
_ERROR_WORDS = ("rror", "xception", "FATAL", "fatal", "ailure", "AILURE", "ailed", "AILED", "panic")
"""`ERROR` in parts: those at a line's start, read there only, and the words anywhere, read only when the line holds
one (an unanchored search tries every alternative at every character)."""


def is_error(line: str) -> bool:
    """Whether `ERROR` matches `line`, each of its parts read only where it can match."""
    if _ERROR_START.match(line) is not None:
        return True
    return any(map(line.__contains__, _ERROR_WORDS)) and _ERROR_WORD.search(line) is not None


FAILING_TEST = re.compile(r"^(FAILED|ERROR)\s+\S+|::\S+\s+(FAILED|ERROR)\b|^(FAIL|ERROR): \w+")
GREP_LINE = re.compile(r"^(?P<path>[^\s:][^:\n]{0,300}?):(?P<line>\d+)[:-]")

LINE_NUMBER = re.compile(r"^\s*(\d+)(?:[:-]|\t|\s{2,})")
"""The line-number prefix of `grep -n`, `cat -n` and `nl` output: an address, worth what the line it addresses holds."""

MODIFIER = (
    r"(?:public|private|protected|internal|static|final|abstract|synchronized|native|default|override|virtual"
    r"|sealed|open|export|async|unsafe|extern|inline|suspend|pub(?:\([\w:]+\))?)"
)
DEFINITION = re.compile(
    r"\s*+(?:\d++[:\s-]++)?+\s*+(?:@\w++\s++)*+"
    rf"(?:(?:{MODIFIER}\s++)*+(?:def|class|function|fn|func|struct|interface|enum|record|trait|impl)\s++(?P<named>\w+)"
    rf"|(?:{MODIFIER}\s++)++(?:[\w<>\[\],.?]++\s++)*+(?P<called>\w+)\s*+\()"
)
"""A line that declares a name: `def`, `class` and their kin, or a method or constructor led by modifiers
(`public void doRegister(URL url) {`, `private static Map<K, V> index(`), where `goto`, `edit` and `sed -n`
come back to. Matched from the line's start (its line-number prefix allowed); every run is possessive, so a line of
a thousand spaces or modifiers is read once, never backtracked over."""

DEFINES = 1.5
"""What a declaration is worth beyond its tokens, while the name it declares is news (`_declares_news`)."""

MAX_LINE_CHARS = 1_000
"""Longer lines are never quoted (they cost more than the detail they carry is worth)."""

MAX_CANDIDATES = 2_000
"""Lines weighed for a gist at most: those most valuable at first sight (a gist quotes a few dozen)."""


@dataclass(frozen=True, slots=True)
class Gist:
    """The chosen lines of an output, rendered in order with omitted spans marked."""

    text: str
    shown_lines: int
    total_lines: int
    chosen: tuple[int, ...] = ()
    """Indexes of the quoted lines: the clearing boundary keeps them, so another process renders the same gist
    without weighing the thread again."""


Seen = Callable[[str], int]
"""How many messages before the output showed a token (0 for a token the output is first to show)."""


def never_seen(_token: str) -> int:
    return 0


def gist(text: str, budget_tokens: int, counter: Callable[[str], int], seen: Seen = never_seen) -> Gist:
    """The most valuable whole lines of `text` within about `budget_tokens`."""
    lines = text.splitlines()
    chosen = choose_lines(lines, budget_tokens, counter, seen)
    return Gist(render(lines, chosen), len(chosen), len(lines), tuple(chosen))


def gist_of_lines(text: str, chosen: Sequence[int]) -> Gist | None:
    """The gist quoting lines `chosen` of `text`, as `gist` chose them once; `None` if they do not fit `text`."""
    lines = text.splitlines()
    if any(not 0 <= index < len(lines) for index in chosen) or list(chosen) != sorted(set(chosen)):
        return None
    return Gist(render(lines, chosen), len(chosen), len(lines), tuple(chosen))


def choose_lines(lines: Sequence[str], budget_tokens: int, counter: Callable[[str], int], seen: Seen) -> list[int]:
    """Indexes of the lines to keep, in order: greedy on value per token, each token counted once."""
    if budget_tokens <= 0 or not lines:
        return []
    # a bounded pool of the lines most valuable at first sight: memory stays small for a huge output
    pool: list[tuple[float, int, list[tuple[str, float]], float, int]] = []
    weight_cache: dict[str, float] = {}
    spread = _spread(lines)
    last = len(lines) - 1
    failure = -1  # the last line that says the output failed: chosen before anything else
    for index, line in enumerate(lines):
        stripped = line.strip()
        maybe = bool(stripped) and may_signal(line)
        if maybe and is_failure(line):
            failure = index
        if not stripped or len(line) > MAX_LINE_CHARS:
            continue
        found = []
        signal = _signal(line, maybe)
        tokens = _tokens(line, signal)
        if tokens is None:
            continue
        # in order of appearance, not a set's: the sums below, and the ties they decide, are the same in every process
        for token in dict.fromkeys(tokens):
            weight = weight_cache.get(token)
            if weight is None:
                if len(weight_cache) >= MAX_CANDIDATES * 8:
                    weight_cache.clear()
                weight = weight_cache[token] = _weight(token, seen(token))
            if weight > 0:
                found.append((token, weight))
        if signal == DEFINES and not _declares_news(line, found):
            signal = 0.0
        extra = signal + (0.75 if index < 2 or index > last - 2 else 0.0)
        if not found and extra <= 0:
            continue
        line_cost = counter(line) + 1
        first_sight = extra + sum(weight / spread.get(token, 1) for token, weight in found)
        entry = (first_sight / line_cost, index, found, extra, line_cost)
        if len(pool) < MAX_CANDIDATES:
            heapq.heappush(pool, entry)
        elif entry[0] > pool[0][0]:
            heapq.heapreplace(pool, entry)
    tokens_of = {entry[1]: entry[2] for entry in pool}
    bonus = {entry[1]: entry[3] for entry in pool}
    cost = {entry[1]: entry[4] for entry in pool}
    candidates = [(-entry[0], entry[1]) for entry in pool]
    del pool
    heapq.heapify(candidates)
    covered: set[str] = set()
    chosen: list[int] = []
    left = budget_tokens
    if failure >= 0 and len(lines[failure]) <= MAX_LINE_CHARS:
        failure_cost = cost.get(failure) or counter(lines[failure]) + 1
        if failure_cost <= left:
            chosen.append(failure)
            left -= failure_cost
            covered.update(token for token, _weight in tokens_of.get(failure, ()))
    while candidates and left > 0:
        _stale, index = heapq.heappop(candidates)
        if index == failure and failure in chosen:
            continue
        fresh = _value(tokens_of[index], bonus[index], covered) / cost[index]
        if fresh <= 0:
            continue
        if candidates and fresh < -candidates[0][0] - 1e-9:  # its tokens were covered since: requeue
            heapq.heappush(candidates, (-fresh, index))
            continue
        if cost[index] > left:
            continue
        chosen.append(index)
        left -= cost[index]
        covered.update(token for token, _weight in tokens_of[index])
    return sorted(chosen)


def _tokens(line: str, signal: float) -> list[str] | None:
    """The distinctive tokens of `line`, or `None` for a numbered line that numbers nothing worth quoting.

    A `grep -n`, `cat -n` or `nl` line's number is an address, worth what the line it addresses holds: without a
    token or a signal after it, `753-        \"\"\"` would cost three tokens and bring back nothing."""
    tokens = TOKEN.findall(line)
    numbered = LINE_NUMBER.match(line)
    if numbered is None or signal > 0 or TOKEN.search(line, numbered.end()):
        return tokens
    return None


def _spread(lines: Sequence[str], cap: int = 20_000) -> dict[str, int]:
    """In how many lines each token appears (a token on every line is one detail, not thousands); bounded."""
    spread: dict[str, int] = {}
    for line in lines:
        if len(line) > MAX_LINE_CHARS:
            continue
        for token in set(TOKEN.findall(line)):
            if token in spread:
                spread[token] += 1
            elif len(spread) < cap:
                spread[token] = 1
    return spread


GAP = "…"
"""The line that stands for each run of omitted lines: the placeholder above a gist says how many lines it kept of how
many, so a gap needs no words (a worded marker cost seven tokens, and a gist has one per gap)."""


def render(lines: Sequence[str], chosen: Sequence[int]) -> str:
    """The chosen lines in order, with a `GAP` line for each run of lines left out."""
    out: list[str] = []
    previous = -1
    for index in chosen:
        if index != previous + 1:
            out.append(GAP)
        out.append(lines[index])
        previous = index
    if chosen and previous < len(lines) - 1:
        out.append(GAP)
    return "\n".join(out)


def _weight(token: str, seen_before: int) -> float:
    """What a token is worth: a new name most; a path less (agents reuse the few they keep seeing); a bare number
    least (sizes, counts and times are rarely written again). A token seen once before is worth less."""
    if seen_before >= 2:
        return 0.0
    if token[0].isdigit():
        base = 0.6
    elif "/" in token:
        base = 0.8
    elif "_" in token or len(token) >= 10 or any(c.isupper() for c in token[1:]):
        base = 1.0
    else:
        base = 1.4
    return base if seen_before == 0 else base * 0.4


SIGNAL_WORDS = (
    *("pass", "fail", "error", "skip", "warn", "ran ", "ok", "complet", "test", "traceback", "panic", "exception"),
    *("fatal", "exit", "interrupt", "command not found", "no such file"),
)
"""Case-folded words of which every line that `SUMMARY`, `FAILING_TEST`, `TRACEBACK_START`, `ERROR` or `FAILURE`
matches holds one, unless it starts with `E` (pytest's `E   ` lines): a line holding none is not searched with those
patterns, which cost several microseconds a line, most lines being none of these."""


def may_signal(line: str) -> bool:
    """Whether `line` may match one of the failure and test-summary patterns (never false when one matches)."""
    if line.startswith("E"):
        return True
    return any(map(line.casefold().__contains__, SIGNAL_WORDS))


def _signal(line: str, maybe: bool) -> float:
    """What `line`'s signal is worth; `maybe`: `may_signal(line)`."""
    if maybe:
        if summary_line(line):
            return 4.0
        if FAILING_TEST.search(line):
            return 3.0
        if TRACEBACK_START.search(line) or is_error(line):
            return 3.0
    if DEFINITION.match(line):
        return DEFINES
    if GREP_LINE.match(line):
        return 0.5
    return 0.0


def _declares_news(line: str, found: list[tuple[str, float]]) -> bool:
    """Whether declaration `line` declares a name still worth something (one the thread has not shown twice): a
    file viewed again re-declares every name in it, and those declarations are no news."""
    declared = DEFINITION.match(line)
    name = declared and (declared.group("named") or declared.group("called"))
    return any(token == name for token, _weight in found)


def _value(tokens: list[tuple[str, float]], bonus: float, covered: set[str]) -> float:
    return bonus + sum(weight for token, weight in tokens if token not in covered)


def gist_budget(policy: ContextPolicy, window: int | None, tokens: int) -> int:
    """Tokens of verbatim lines an output of `tokens` keeps when it leaves the view, on a model of `window` tokens."""
    budget = min(policy.gist_max_tokens, int(tokens * policy.gist_share))
    window = window or policy.window
    if policy.gist_window_share is not None and window:
        budget = min(budget, int(window * policy.gist_window_share))
    return budget


__all__ = [
    "ERROR",
    "FAILING_TEST",
    "GAP",
    "GREP_LINE",
    "MAX_LINE_CHARS",
    "SIGNAL_WORDS",
    "SUMMARY",
    "TRACEBACK_START",
    "Gist",
    "Seen",
    "choose_lines",
    "gist",
    "gist_budget",
    "gist_of_lines",
    "is_error",
    "may_signal",
    "never_seen",
    "render",
    "summary_line",
]
