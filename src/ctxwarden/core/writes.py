"""Which files an agent's tool calls write: by a file tool, or by a shell line.

A fold's facts list every file written, and a clipped argument keeps the lines that write
one, so both read the same rules: the file tools' `file_path`, and in shell text a
redirection, `tee`, `sed -i` or a script's `open(..., "w")`.
"""

from __future__ import annotations

import re
import shlex

from langchain_core.messages import BaseMessage

FILE_WRITERS = frozenset({"write_file", "edit_file"})
"""Tools whose `file_path` argument names a file they write."""

_REDIRECT = re.compile(r"(?<![<>&\d])(?:\d?>>?|&>)\s*(['\"]?)(?P<path>[^\s'\";|&<>()]+)\1")
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
                for line in value.splitlines():
                    for path in shell_writes(line):
                        found.setdefault(path, None)
    return list(found)


def shell_writes(line: str) -> list[str]:
    """The paths one shell line writes: a redirection, `tee`, `sed -i`, a script's `open(..., "w")`."""
    if ">" not in line and "tee" not in line and "open(" not in line and "sed" not in line:
        return []  # what every rule below needs: most lines of a long argument are ruled out in C
    paths = [m.group("path") for m in _REDIRECT.finditer(line)]
    paths += [m.group("path") for m in _TEE.finditer(line)]
    paths += [m.group("path") for m in _OPEN_WRITE.finditer(line)]
    if "sed" in line and " -i" in line:
        paths += _sed_in_place(line)
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


__all__ = ["FILE_WRITERS", "shell_writes", "written_paths"]
