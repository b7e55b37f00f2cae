"""Tool output enters the thread as a terminal shows it, on outputs recorded from real programs; the raw stays exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast
from unicodedata import normalize

import pytest
from deepagents.backends import FilesystemBackend
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from ctxwarden.clip import fast_draw, fast_screen, pyte_screen, terminal
from ctxwarden.clip.recall import lookup_result, make_recall_tool
from ctxwarden.clip.terminal import full_screen_lines, needs_rendering, render
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.report.render import lifecycle_line
from ctxwarden.stack.build import context_middleware
from ctxwarden.stack.middleware import ContextWindowMiddleware
from ctxwarden.trace import TraceEvent, TraceStore

DATA = Path(__file__).parent / "data" / "terminal"
BAR = "━" * 40


def recorded(name: str) -> str:
    return (DATA / f"{name}.raw").read_bytes().decode("utf-8")


def _core(folder: Path, policy: ContextPolicy | None = None) -> ContextWindowMiddleware:
    (folder / "files").mkdir(parents=True)
    backend = FilesystemBackend(root_dir=folder / "files", virtual_mode=True)
    built = context_middleware(policy=policy or ContextPolicy(window=200_000), backend=backend, trace=folder / "t.db")
    return cast(ContextWindowMiddleware, built[0])


def _request(call_id: str, tool: str = "bash") -> ToolCallRequest:
    ask = AIMessage("", id=f"ai-{call_id}", tool_calls=[{"name": tool, "args": {}, "id": call_id}])
    call = {"name": tool, "args": {}, "id": call_id, "type": "tool_call"}
    return ToolCallRequest(tool_call=call, tool=None, state={"messages": [ask]}, runtime=cast(Any, None))  # type: ignore[arg-type]


def _arrive(core: ContextWindowMiddleware, text: str, call_id: str = "c1", tool: str = "bash") -> ToolMessage:
    request = _request(call_id, tool)
    out = core.wrap_tool_call(request, lambda _r: ToolMessage(text, tool_call_id=call_id, name=tool, id=f"t-{call_id}"))
    return cast(ToolMessage, out)


FINAL_LINES = {
    "pip-download": [
        "Collecting pandas==2.2.3",
        f"     {BAR} 13.1/13.1 MB 2.0 MB/s eta 0:00:00",
        "Successfully downloaded pandas",
    ],
    "tqdm-loop": [
        "hashing files: 100%|" + "█" * 42 + "| 3000/3000 [00:03<00:00, 878.11it/s]",
        "done: total 4498500",
    ],
    "tqdm-multibar": [
        "layer 0: 100%|" + "█" * 50 + "| 400/400 [00:00<00:00, 470.61it/s]",
        "layer 1: 100%|" + "█" * 50 + "| 550/550 [00:01<00:00, 468.55it/s]",
        "layer 2: 100%|" + "█" * 50 + "| 700/700 [00:01<00:00, 466.85it/s]",
    ],
    "pytest-color": [
        "collected 42 items",
        "E       ValueError: invalid literal for int() with base 10: 'three'",
        "FAILED test_sample.py::test_parse_config - ValueError: invalid literal for int() with base 10: 'three'",
        "=================================== 1 failed, 41 passed in 0.08s ===================================",
    ],
}


@pytest.mark.parametrize("name", sorted(FINAL_LINES))
def test_a_recorded_output_renders_to_every_line_its_terminal_shows(name: str) -> None:
    raw = recorded(name)
    lines = render(raw).text.split("\n")
    for line in FINAL_LINES[name]:
        assert line in lines
    missing = [line for line in full_screen_lines(raw) if line not in lines]
    assert missing == []
    assert "\x1b" not in "".join(lines)
    assert "\r" not in "".join(lines)


@pytest.mark.parametrize("name", ["pip-download", "tqdm-loop", "tqdm-multibar"])
def test_progress_bars_cost_a_tenth_of_their_raw_tokens_and_the_raw_comes_back_exactly(
    tmp_path: Path, name: str
) -> None:
    core = _core(tmp_path)
    raw = recorded(name)
    out = _arrive(core, raw)
    meter = TokenMeter()
    assert meter.message_tokens(out) * 10 <= meter.message_tokens(ToolMessage(raw, tool_call_id="x"))
    for line in FINAL_LINES[name]:
        assert line in str(out.content).split("\n")
    assert 'part="raw")' in str(out.content)  # the marker says how to get the raw back
    record = out.response_metadata[METADATA_KEY]
    assert (tmp_path / "files" / record["raw_path"].lstrip("/")).read_bytes() == raw.encode("utf-8")
    ask = cast(ToolCallRequest, _request("c1")).state["messages"][0]
    assert lookup_result([ask, out], "c1", core.evictor.backend, raw=True) == (raw, None)
    tool = make_recall_tool(core.evictor.backend)
    answer = tool.invoke({"state": {"messages": [ask, out]}, "call_id": "c1", "part": "raw", "limit": 50_000})
    assert answer.startswith(raw[:1_000])


def test_each_rendering_is_traced_with_the_tokens_it_saved_and_the_report_sums_them(tmp_path: Path) -> None:
    core = _core(tmp_path)
    _arrive(core, recorded("tqdm-loop"), "c1")
    _arrive(core, recorded("pip-download"), "c2")
    _arrive(core, "plain output\nno codes\n", "c3")
    core.recorder.flush()
    store = TraceStore(tmp_path / "t.db")
    events = store.events(kind="tool_render")
    assert [e.payload["call_id"] for e in events] == ["c1", "c2"]
    assert all(e.payload["freed"] > 9 * e.payload["tokens"] for e in events)
    threaded = TraceStore(tmp_path / "threaded.db")  # the events as a thread's run records them
    threaded.append([TraceEvent(e.kind, e.payload, "t") for e in events])
    done = threaded.lifecycle("t")["tool_render"]
    assert done == {"count": 2, "tokens": sum(e.payload["tokens"] for e in events), "freed": done["freed"]}
    assert done["freed"] == sum(e.payload["freed"] for e in events)
    report = cast(Any, type("R", (), {"trace_found": True, "lifecycle": threaded.lifecycle("t")})())
    assert f"2 rendered as a terminal shows them ({done['freed']:,} tokens saved)" in lifecycle_line(report)


def test_plain_output_enters_untouched_with_no_file_and_no_emulator(tmp_path: Path) -> None:
    core = _core(tmp_path)
    text = "line one\r\nline two\n\ttabbed ünïcode\n"
    assert not needs_rendering(text)
    assert render(text).text is text
    out = _arrive(core, text)
    assert out.content == text
    assert "raw_path" not in (out.response_metadata.get(METADATA_KEY) or {})
    assert not list(tmp_path.glob("files/large_tool_results/**/*.raw"))


def test_overwritten_frames_show_what_a_terminal_leaves_of_them() -> None:
    assert render("downloading 100%\rdone").text == "doneloading 100%"
    assert render("downloading 100%\r\x1b[2Kdone").text == "done"
    assert render("abc\bX\n\x1b[31mred\x1b[0m\n").text == "abX\nred\n"
    assert render("top\nmid\nbot\x1b[1A\rMID\x1b[1B\n").text == "top\nMID\nbot\n"


def test_a_rendered_output_past_its_cap_keeps_head_and_tail_and_says_how_to_get_the_rest(tmp_path: Path) -> None:
    core = _core(tmp_path, ContextPolicy(window=2_000_000, evict_max_tokens=10**6, render_tail_max_bytes=4_000))
    raw = "".join(f"\x1b[32mline {i:05d} ok\x1b[0m\n" for i in range(5_000))
    out = str(_arrive(core, raw).content)
    assert "line 00000 ok" in out
    assert "line 04999 ok" in out
    assert "line 02500 ok" not in out
    assert "bytes (" in out
    assert "lines) of this output, as a terminal shows it, cut here" in out
    assert 'part="raw")' in out
    assert len(out.encode()) < 4_000 + 500 + 600


def test_rendering_can_be_switched_off_excluded_per_tool_or_overridden(tmp_path: Path) -> None:
    raw = recorded("tqdm-loop")
    off = _arrive(_core(tmp_path / "a", ContextPolicy(window=2_000_000, render_terminal=False)), raw)
    assert "\r" in str(off.content)  # the raw text entered (and was evicted as it is)
    excluded = ContextPolicy(window=2_000_000, render_exclude_tools=("bash",))
    assert "\r" in str(_arrive(_core(tmp_path / "b", excluded), raw).content)
    assert "\r" not in str(_arrive(_core(tmp_path / "b2", excluded), raw, tool="python").content)
    forced = ContextPolicy(window=2_000_000, render_terminal=False, render_tools={"bash": True})
    assert "\r" not in str(_arrive(_core(tmp_path / "c", forced), raw).content)


async def test_the_async_path_renders_too(tmp_path: Path) -> None:
    core = _core(tmp_path)
    raw = recorded("pip-download")

    async def handler(_request: Any) -> ToolMessage:
        return ToolMessage(raw, tool_call_id="c1", name="bash", id="t1")

    out = cast(ToolMessage, await core.awrap_tool_call(_request("c1"), handler))
    assert "Successfully downloaded pandas" in str(out.content)
    assert "\x1b" not in str(out.content)
    record = out.response_metadata[METADATA_KEY]
    assert (tmp_path / "files" / record["raw_path"].lstrip("/")).read_bytes() == raw.encode()


def test_a_multibar_display_past_the_emulator_budget_is_drawn_exactly_as_pyte_draws_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = recorded("tqdm-multibar") * 7  # past SCREEN_BUDGET_CHARS, all of it one screen region
    assert len(raw) > terminal.SCREEN_BUDGET_CHARS
    fast = render(raw)
    assert fast.approximate_lines == 0
    assert fast.screen_lines == raw.count("\n") + 1
    monkeypatch.setattr(terminal, "fast_screen", lambda *_args: None)
    monkeypatch.setattr(terminal, "SCREEN_BUDGET_CHARS", 10 * len(raw))
    monkeypatch.setattr(terminal, "PYTE_CELL_BUDGET", 10 * len(raw) ** 2)
    assert fast.text == render(raw).text  # the same region, every character through pyte


_ATOMS = [
    "a",
    "bc",
    "▋",
    "xyz ",
    "  ",
    "下",
    "🚀a",
    "\t",
    "\r",
    "\n",
    "\x1b[A",
    "\x1b[2A",
    "\x1b[0A",
    "\x1b[B",
    "\x1b[3B",
]
_ATOMS += ["\x1b[K", "\x1b[0K", "\x1b[1K", "\x1b[2K"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), max_size=40), st.integers(1, 4), st.integers(1, 8))
def test_the_fast_screen_draws_what_pyte_draws(atoms: list[str], rows: int, columns: int) -> None:
    data = "".join(atoms)  # what multi-bar displays write: text, returns, line feeds, moves up and down, erases
    assert fast_screen.fast_screen(data, rows, columns) == terminal._screen(data, rows, columns)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), max_size=40), st.integers(1, 4), st.integers(1, 8))
def test_the_fast_screen_draws_what_pyte_draws_once_its_rows_are_kept_as_lists(
    atoms: list[str], rows: int, columns: int
) -> None:
    data = "".join(atoms)  # as above, with every row past two cells kept as a `Row`
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_screen, "SHORT_ROW", 2)
        assert fast_screen.fast_screen(data, rows, columns) == terminal._screen(data, rows, columns)


def test_sequences_pyte_cannot_read_leave_the_output_arriving(tmp_path: Path) -> None:
    raw = "start\n\x1b[?1mprivate colour\x1b[?2A up\n\x1b[²mfar digits\rFAR\nend\n"
    shown = render(raw).text
    assert shown.split("\n")[0] == "start"
    assert "private colour up" in shown
    assert "digits" in shown
    assert shown.rstrip().endswith("end")
    out = _arrive(_core(tmp_path), raw * 40)  # long enough that rendering pays for its note
    assert "private colour up" in str(out.content)


def test_the_emulator_draws_a_bounded_share_of_an_output_whatever_its_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    fed: list[int] = []
    feed = terminal._feed
    monkeypatch.setattr(
        terminal, "_feed", lambda screen, data, run=None: fed.append(len(data)) or feed(screen, data, run)
    )
    line = "\r".join(f"\x1b[2C\x1b[X{i:04d} wide 漢字 frame" for i in range(20))  # an erase of characters: pyte
    raw = "\n".join([line] * 2_000)
    rendered = render(raw)
    assert sum(fed) <= terminal.SCREEN_BUDGET_CHARS
    assert rendered.approximate_lines > 0
    last = render(line).text
    assert rendered.text.split("\n")[-1] == last.strip()  # past the budget: the last frame, its cursor moves left out


def test_a_line_pyte_fails_on_is_counted_as_approximate() -> None:
    rendered = render("ok\n\x1b[²mfar\x1b[3D digits\rFAR\n")
    assert rendered.approximate_lines == 1
    assert rendered.text.split("\n")[0] == "ok"


_ROW_ATOMS = [
    "a",
    "bc",
    "xyz ",
    "  ",
    "⠋",
    "下载",
    "🚀",
    "\r",
    "\b",
    "\b\b\b",
    "|\b",
    "/\b",
    "\x1b[C",
    "\x1b[3C",
    "\x1b[0C",
]
_ROW_ATOMS += ["\x1b[D", "\x1b[2D", "\x1b[G", "\x1b[1G", "\x1b[0G", "\x1b[4G", "\x1b[2`", "\x1b[K", "\x1b[0K"]
_ROW_ATOMS += ["\x1b[1K", "\x1b[2K", "\x1b[3K", "\x1b[20000C", "\x1b[20000G"]


@settings(max_examples=1_000, deadline=None)
@given(st.lists(st.sampled_from(_ROW_ATOMS), max_size=40))
def test_the_fast_row_draws_what_pyte_draws(atoms: list[str]) -> None:
    data = "".join(atoms)  # what spinners and counters rewritten in place write: text, returns, backspaces, moves
    fast = fast_draw.fast_row(data)
    if fast is not None:
        assert fast == terminal._one_row(data)
    else:  # what pyte fails on or ignores, and a line that reaches the last column (pyte wraps it)
        assert "[3K" in data or "`" in data or "0000" in data


def test_an_npm_spinner_past_the_emulator_budget_shows_its_last_frame() -> None:
    frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    spin = "".join(f"\x1b[2K\x1b[1G{frames[i % 10]} Installing dependencies ({i})" for i in range(8_000))
    line = spin + "\x1b[2K\x1b[1G✔ Installed"
    assert len(line) > terminal.SCREEN_BUDGET_CHARS
    rendered = render(f"start\n{line}\nend\n")
    assert rendered.text == "start\n✔ Installed\nend\n"
    assert rendered.approximate_lines == 0


def test_a_line_of_two_cell_characters_is_never_wrapped() -> None:
    line = "下载完成 100% 文件已保存\r\x1b[2K下载完成 100% 文件已保存到本地磁盘 🚀\n"
    assert render(line).text == "下载完成 100% 文件已保存到本地磁盘 🚀\n"
    over = "\x1b[31m进度\x1b[0m 这是一个很长的中文行，用来测试是否会被折行显示出来。\r完成\n"
    assert (
        render(over).text
        == full_screen_lines(over)[0] + "\n"
        == "完成 这是一个很长的中文行，用来测试是否会被折行显示出来。\n"
    )
    bars = "第一 ▋▋\n第二 ▋\x1b[1A\r第一 ▋▋▋\x1b[1B\n"
    assert render(bars).text == "\n".join(full_screen_lines(bars)) + "\n"


def test_a_spinner_of_two_cell_characters_is_drawn_in_time_linear_in_its_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line = "".join(f"\x1b[2K\x1b[1G⠋ 下载 {i}" for i in range(10_000))  # within the budget: pyte took 50 s on it
    fed: list[int] = []
    feed = terminal._feed
    monkeypatch.setattr(
        terminal, "_feed", lambda screen, data, run=None: fed.append(len(data)) or feed(screen, data, run)
    )
    rendered = render(line + "\n")
    assert rendered.text == "⠋ 下载 9999\n"
    assert not fed  # pyte drew none of it


def test_a_spinner_with_tabs_is_drawn_without_pyte(monkeypatch: pytest.MonkeyPatch) -> None:
    line = "".join(f"\x1b[2K\x1b[1G\t⠋ step {i}" for i in range(10_000))  # pyte sorted every tab stop at each tab
    fed: list[int] = []
    feed = terminal._feed
    monkeypatch.setattr(
        terminal, "_feed", lambda screen, data, run=None: fed.append(len(data)) or feed(screen, data, run)
    )
    assert render(line + "\n").text == "        ⠋ step 9999\n"
    assert not fed
    tabs = "a\tb\t\tc\rX\n"
    assert render(tabs).text == full_screen_lines(tabs)[0] + "\n" == "X\tb\t\tc".expandtabs(8) + "\n"


def test_a_spinner_of_any_length_shows_its_last_frame() -> None:
    spinner = "".join("|/-\\"[i % 4] + "\b" for i in range(1_000_000)) + "done"  # one line, 2 MB of frames
    assert len(spinner) > terminal.SCREEN_BUDGET_CHARS
    rendered = render(f"building\n{spinner}\n")
    assert rendered.text == "building\ndone\n"
    assert rendered.approximate_lines == 0
    small = "".join("|/-\\"[i % 4] + "\b" for i in range(9)) + "ok\b\bOK"
    assert render(small).text == full_screen_lines(small)[0] == "OK"


def test_past_the_emulator_budget_a_line_still_takes_its_backspaces() -> None:
    line = "".join("\x1b[1X" + "|/-\\"[i % 4] + "\b" for i in range(60_000)) + "done"  # an erase of characters
    assert len(line) > terminal.SCREEN_BUDGET_CHARS
    rendered = render(line)
    assert rendered.approximate_lines == 1
    assert rendered.text == "done"


_LINE_ATOMS = ["ab", "下", "⚠\ufe0f", "e\u0301", "\t", "\r", "\b", "\x1b[1G", "\x1b[G", "\x1b[3G", "\x1b[2K", "\x1b[K"]
_LINE_ATOMS += ["\x1b[1K", "\x1b[2C", "\x1b[D", "\x1b[P", "\x1b[2@", "\x1b[X"]


@settings(max_examples=1_000, deadline=None)
@given(st.lists(st.sampled_from(_LINE_ATOMS), max_size=30))
def test_a_line_renders_as_the_whole_of_it_drawn_on_one_screen(atoms: list[str]) -> None:
    data = "".join(atoms)  # the shortcuts (frames after an erase, fast drawing) against pyte drawing every byte
    if not needs_rendering(data):  # plain text (tabs and all) is left as it is
        assert render(data).text == data
        return
    shown, drawn = render(data).text.rstrip(), next(iter(full_screen_lines(data)), "").rstrip()
    if "\t" in shown:  # a line with no code left once colours go is text: its tabs stay tabs
        return
    assert normalize("NFC", shown) == drawn  # pyte composes an accent with its letter; text left as it is may not


def test_an_emoji_with_a_variation_selector_keeps_the_text_after_it() -> None:
    line = "\x1b[2K\x1b[1G⚠\ufe0f 3 vulnerabilities found (1 moderate)\x1b[X"  # an erase of a character: pyte draws it
    assert render(line + "\n").text == "⚠\ufe0f 3 vulnerabilities found (1 moderate)\n"  # pyte alone: "⚠"


def test_a_line_erased_without_returning_is_redrawn_where_the_cursor_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that erases its line but forgets `\\r` leaves the cursor further right at every frame; each frame is
    drawn from there, not padded from the first column again (100,000 such frames with a tab took 180 s)."""
    moved: list[int] = []

    class CountedRow(fast_draw.Row):
        def draw(self, x: int, drawn: str) -> int:
            moved.append(super().draw(x, drawn))
            return moved[-1]

    class CountedTextRow(fast_draw.TextRow):
        def draw(self, x: int, drawn: str) -> int:
            moved.append(super().draw(x, drawn))
            return moved[-1]

    for module in (fast_draw, fast_screen):
        monkeypatch.setattr(module, "Row", CountedRow)
        monkeypatch.setattr(module, "TextRow", CountedTextRow)
    for frame in ("\tX\x1b[2K", "⠋ step\x1b[1K", "X\x1b[2K\x1b[1A", "\x1b[1B\tY\x1b[2K\x1b[1A\x1b[1K"):
        rendered = render(frame * 50_000 + "done")
        assert rendered.text.strip() == "done"
        assert rendered.approximate_lines == 0
    # each character drawn at the end of one row of a screen that grows to 300,000 cells: the row is not copied
    rendered = render("X\x1b[1A" * 300_000)
    assert rendered.text == "X" * 300_000
    assert rendered.approximate_lines == 0
    assert len(moved) > 500_000
    assert sum(moved) == 0
    assert render("ab\x1b[2Kcd").text == full_screen_lines("ab\x1b[2Kcd")[0] == "  cd"


def test_a_drawing_that_would_move_too_many_cells_is_left_to_the_other_ways() -> None:
    """Cursor jumps make a drawing pad more than it draws (`CSI 9999 C` then a character): past `WORK_PER_CHAR` cells
    a character, the fast drawing gives the line up to the emulator (or, past its budget, to the approximation)."""
    frame = "\x1b[2KX\x1b[9999CY\x1b[9999D"
    frames = frame * 2_000
    assert fast_draw.fast_row(frames) is None
    few = frame * 50  # a few such jumps are what a wide display asks for
    drawn = fast_draw.fast_row(few)
    assert drawn == terminal._one_row(few)
    assert drawn is not None
    assert drawn.split() == ["X", "Y"]
    rendered = render(f"start\n{frames}done\nend\n")  # within the emulator's budget: pyte draws it
    assert rendered.text == f"start\n{terminal._one_row(frames + 'done')}\nend\n"
    assert rendered.approximate_lines == 0


def test_pyte_walks_a_bounded_number_of_cells_for_one_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delete of characters walks every cell drawn on its line: a line that does it at every frame without erasing
    what it drew costs pyte in the square of its size (16,000 frames, 96 KB, took 7 s)."""
    walked: list[int] = []
    original = pyte_screen.Screen.delete_characters

    def counted(screen: Any, count: int | None = None) -> None:
        walked.append(len(screen.buffer[screen.cursor.y]))
        original(screen, count)

    monkeypatch.setattr(pyte_screen.Screen, "delete_characters", counted)
    rendered = render("\n".join(["X\x1b[1P" * 15_000] * 3))  # each line within the emulator's budget of characters
    assert sum(walked) <= terminal.PYTE_CELL_BUDGET + 15_000
    assert rendered.approximate_lines == 3
    assert rendered.text == "\n".join(["X" * 15_000] * 3)
    walked.clear()
    small = "ab\x1b[1D\x1b[1Pc"
    assert render(small).text == full_screen_lines(small)[0] == "ac"  # within the budget: drawn by pyte
    assert walked


_SCREEN_ATOMS = ["ab", "下", "xyz ", "    ", "\r", "\b", "\x1b[1G", "\x1b[3G", "\x1b[2K", "\x1b[K", "\x1b[1K"]
_SCREEN_ATOMS += ["\x1b[2C", "\x1b[D", "\x1b[P", "\x1b[2@", "\x1b[X", "\n", "\n"]
_SCREEN_ATOMS += ["\x1b[A", "\x1b[2A", "\x1b[B", "\x1b[1F"]


@settings(max_examples=1_000, deadline=None)
@given(st.lists(st.sampled_from(_SCREEN_ATOMS), max_size=40))
def test_lines_redrawn_after_a_move_up_render_as_the_whole_output_drawn_on_one_screen(atoms: list[str]) -> None:
    data = "".join(atoms)  # a line that lands on a row an earlier one wrote: its erases, blanks and moves act on it
    shown = [line.rstrip() for line in render(data).text.split("\n") if line.strip()]
    assert shown == [line.rstrip() for line in full_screen_lines(data)]


def test_docker_compose_redrawing_its_rows_shows_each_rows_last_state() -> None:
    up = (
        "[+] Running 0/2\x1b[K\n ⠿ Network app_default  Creating\x1b[K\n ⠿ Container app-db-1   Creating\x1b[K\n"
        "\x1b[3A\x1b[1G[+] Running 2/2\x1b[K\n ✔ Network app_default  Created\x1b[K\n"
        " ✔ Container app-db-1   Started\x1b[K\n"
    )
    expected = ["[+] Running 2/2", " ✔ Network app_default  Created", " ✔ Container app-db-1   Started"]
    assert full_screen_lines(up) == expected
    assert render(up).text.split("\n")[:3] == expected  # before: " ✔ Network app_default  Createdg"


def test_what_a_pager_drew_on_the_alternate_screen_is_gone_once_it_left_it() -> None:
    before = "$ make test\ncompiling 3 files\ntests: 41 passed, 1 failed\n"
    pager = "\x1b[?1049h\x1b[H\x1b[2Jpager line 1\npager line 2\n~\n~\n"
    shown = render(f"{before}{pager}\x1b[?1049lexit status 1\n").text
    # before: the pager's clear erased the main screen's lines, and its own lines stood in their place
    assert [line for line in shown.split("\n") if line.strip()] == [*before.splitlines(), "exit status 1"]
    still_open = render(f"{before}{pager}").text  # a program still on its screen at the end: that screen shows
    assert "pager line 2" in still_open
