"""Which files an agent's tool calls write: by a file tool, or by a shell line.

A fold's facts list every file written, and a clipped argument keeps the lines that write
one, so both read the same rules: the file tools' `file_path`, and in shell text a
redirection, `tee`, `sed -i` or a script's `open(..., "w")`. The body of a heredoc is the
data of its command, not shell: a `>` there (a comparison in a Python script being written)
redirects nothing, unless the heredoc feeds a shell. So is a quoted string: `pip install "pkg>=1.2"`
writes no file `=1.2`, unless the string is the script of `sh -c`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence

from langchain_core.messages import BaseMessage

FILE_WRITERS = frozenset({"write_file", "edit_file"})
"""Tools whose `file_path` argument names a file they write."""

_REDIRECT = re.compile(r"(?<![<>&\d])(?:\d?>>?|&>)(?!=)\s*(['\"]?)(?P<path>[^\s'\";|&<>()]+)\1")
_TEE = re.compile(r"\btee\s+(?:-a\s+)?(['\"]?)(?P<path>[^\s'\";|&<>()]+)\1")
_OPEN_WRITE = re.compile(r"open\(\s*['\"](?P<path>[^'\"]+)['\"]\s*,\s*['\"][wax]")
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "-"})


def written_paths(message: BaseMessage) -> list[str]:
    """Paths the tool calls of `message` write, in order, without repeats."""
    found: dict[str, None] = {}
    for call in getattr(message, "tool_calls", None) or ():
        args = call.get("args") or {}
        if call.get("name") in FILE_WRITERS:
            path = args.get("file_path") or args.get("path")
            if isinstance(path, str) and path:
                found.setdefault(path, None)
            continue
        for value in args.values():
            if isinstance(value, str):
                for paths in lines_writes(value.splitlines()):
                    for path in paths:
                        found.setdefault(path, None)
    return list(found)


def lines_writes(lines: Sequence[str]) -> list[list[str]]:
    """For each line of a shell text, the paths it writes; a heredoc's body is read as its command's data (a
    script's `open(..., "w")` counts there, a `>` does not), or as shell when the heredoc feeds a shell."""
    out: list[list[str]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(shell_writes(line))
        index += 1
        for tag, feeds_shell in _heredocs(line):
            end = next((i for i in range(index, len(lines)) if lines[i].strip() == tag), None)
            if end is None:  # never closed: not a heredoc (a shift in an expression), the lines are shell
                continue
            read = shell_writes if feeds_shell else _script_writes
            out.extend(read(body) for body in lines[index:end])
            out.append([])  # the closing tag
            index = end + 1
    return out


def shell_writes(line: str) -> list[str]:
    """The paths one shell line writes: a redirection, `tee`, `sed -i`, a script's `open(..., "w")`."""
    if ">" not in line and "tee" not in line and "open(" not in line and "sed" not in line:
        return []  # what every rule below needs: most lines of a long argument are ruled out in C
    paths = [m.group("path") for m in _REDIRECT.finditer(line) if _is_shell_at(line, m.start())]
    paths += [m.group("path") for m in _TEE.finditer(line)]
    paths += [m.group("path") for m in _OPEN_WRITE.finditer(line)]
    if "sed" in line and " -i" in line:
        paths += _sed_in_place(line)
    return _files(paths)


_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*(['\"]?)(?P<tag>[A-Za-z_]\w*)\1")
_FEEDS_SHELL = re.compile(r"(?:^|[\s;|&(])(?:ba|z|da)?sh(?:\s+-\w+)*\s*$")


def _heredocs(line: str) -> list[tuple[str, bool]]:
    """The heredocs a shell line opens, in order: each closing tag, and whether its body feeds a shell."""
    if "<<" not in line:
        return []
    return [(m.group("tag"), bool(_FEEDS_SHELL.search(line[: m.start()]))) for m in _HEREDOC.finditer(line)]


_SHELL_C = re.compile(r"(?:^|[\s;|&(])(?:ba|z|da)?sh(?:\s+-\w+)*\s+-\w*c\s*$")


def _is_shell_at(line: str, position: int) -> bool:
    """Whether `position` of a shell line is shell: outside quotes, or in the quoted script of `sh -c`. A `>` inside
    quotes is data (`pip install "pkg>=1.2"`, `python -c "print(x > 0.5)"`) and redirects nothing."""
    if "'" not in line[:position] and '"' not in line[:position]:
        return True
    quote, opened, index = "", 0, 0
    while index < position:
        char = line[index]
        if quote != "'" and char == "\\":
            index += 2
            continue
        if quote and char == quote:
            quote = ""
        elif not quote and char in "'\"":
            quote, opened = char, index
        index += 1
    return not quote or bool(_SHELL_C.search(line[:opened]))


def _script_writes(line: str) -> list[str]:
    """The paths a line of a script (a heredoc's body) writes when it runs: its `open(..., "w")`."""
    if "open(" not in line:
        return []
    return _files(m.group("path") for m in _OPEN_WRITE.finditer(line))


def _files(paths: Iterable[str]) -> list[str]:
    return [p for p in paths if p not in _NOT_FILES and not p.startswith(("&", "$", "-")) and ("/" in p or "." in p)]


def _sed_in_place(line: str) -> list[str]:
    for command in re.split(r"&&|\|\||;|\|", line):
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        if not words or words[0] != "sed" or not any(w.startswith("-i") for w in words[1:]):
            continue
        operands = [w for w in words[1:] if not w.startswith("-")]
        has_script_flag = any(w in {"-e", "--expression"} or w.startswith("-e") for w in words[1:])
        files = operands if has_script_flag else operands[1:]
        return [f for f in files if not f.startswith(("s/", "/"))] or files[-1:]
    return []


__all__ = ["FILE_WRITERS", "lines_writes", "shell_writes", "written_paths"]
