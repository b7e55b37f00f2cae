"""The /context report: figures from the thread and the trace, three renderings, a text snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from rich.console import Console

from ctxwarden import ApproximateCounter, ContextPolicy, TokenMeter, WindowUnknownError, create_context_agent
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.errors import UnknownThreadError
from ctxwarden.replay import scripted_model
from ctxwarden.report import CATEGORIES, acontext_report, build_report, context_report

SNAPSHOT = Path(__file__).parent / "snapshots" / "context_report.txt"


def _stamp(input_tokens: int, *, reported: int | None = None, model: str = "claude-x", window: int = 32_000) -> dict:
    return {
        "model": model,
        "window": window,
        "window_source": "profile",
        "input_tokens": input_tokens,
        "system_tokens": 1_200,
        "tool_schema_tokens": 2_800,
        "message_tokens": input_tokens - 4_000,
        "calibration": 1.0,
        "fraction": input_tokens / window,
        "gauge": "ok",
        "overflow": False,
        "applied": [],
        "reported_input_tokens": reported,
    }


def _thread() -> list:
    messages: list = [HumanMessage("Fix the failing parser test. " * 20, id="u1")]
    for i in range(6):
        call = {"name": "bash", "args": {"command": f"pytest tests/test_{i}.py"}, "id": f"c{i}"}
        messages.append(
            AIMessage("", id=f"a{i}", tool_calls=[call], response_metadata={METADATA_KEY: _stamp(5_000 + 1_500 * i)})
        )
        messages.append(ToolMessage("collected 12 items ... FAILED " * 200, tool_call_id=f"c{i}", id=f"t{i}"))
    messages.append(
        AIMessage(
            "The parser drops comments; fixing.",
            id="a-last",
            response_metadata={METADATA_KEY: _stamp(14_000, reported=14_600)},
        )
    )
    messages.append(HumanMessage("Also keep the old behaviour behind a flag.", id="u2"))
    return messages


def _report(**kwargs: object):
    spend = {"main": {"calls": 7, "input_tokens": 66_500, "output_tokens": 840, "cached_input_tokens": 41_000}}
    lifecycle = {
        "eviction": {"count": 1, "tokens": 30_120, "freed": 0},
        "context_clear": {"count": 2, "tokens": 0, "freed": 9_400},
    }
    return build_report(
        _thread(),
        thread_id="parser-fix",
        meter=TokenMeter(ApproximateCounter()),
        spend=spend,
        lifecycle=lifecycle,
        **kwargs,
    )


def test_text_form_matches_the_snapshot() -> None:
    text = _report().to_text()
    if os.environ.get("UPDATE_SNAPSHOTS") or not SNAPSHOT.exists():
        SNAPSHOT.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == SNAPSHOT.read_text(encoding="utf-8")


def test_used_is_the_last_reported_input_plus_what_came_since() -> None:
    report = _report()
    meter = TokenMeter(ApproximateCounter())
    since = _thread()[-2:]  # the last stamped reply and the user's new message
    assert report.last_input_tokens == 14_600
    assert report.added_since == meter.messages_tokens(since)
    assert report.used == 14_600 + report.added_since
    assert report.calls == 7


def test_categories_add_up_to_the_window() -> None:
    report = _report()
    assert sum(report.categories.values()) == report.used
    assert sum(tokens for _name, tokens in report.rows()) == report.window
    assert [name for name, _ in report.rows()] == [*CATEGORIES, "free", "reserved"]
    assert report.categories["tool results"] > report.categories["assistant messages"]
    for later in ("skills index", "memory index", "instruction files", "summary", "cleared placeholders"):
        assert report.categories[later] == 0  # filled by layers still to come
    assert report.reserved == 32_000 - 27_200


def test_thresholds_and_forecast() -> None:
    report = _report()
    assert (report.clear_at, report.clear_to, report.fold_at) == (19_200, 9_600, 27_200)
    meter = TokenMeter(ApproximateCounter())
    results = [m for m in _thread() if isinstance(m, ToolMessage)]
    keep = ContextPolicy().keep_tool_results
    clearable_raw = sum(meter.message_tokens(m) - 40 for m in results[:-keep])  # the newest stay
    raw_total = 1_200 + 2_800 + meter.messages_tokens(_thread())  # categories are scaled to `used`
    assert report.clearable == pytest.approx(clearable_raw * report.used / raw_total, abs=1)
    assert report.next_clear_frees == min(report.clearable, report.clear_at - report.clear_to)
    clear_line, fold_line = report.forecast()
    assert clear_line.startswith(f"the next clear fires at 19,200 tokens ({19_200 - report.used:,} from now)")
    assert fold_line == f"the next fold fires at 27,200 tokens ({27_200 - report.used:,} from now)"


def test_against_another_models_window() -> None:
    report = _report(model=scripted_model([], window=8_000, name="small"))
    assert (report.model, report.window) == ("small", 8_000)
    assert report.gauge == "critical"
    assert report.forecast()[1].startswith("clearing gets the next call under the fold threshold")
    assert report.free == 0


def test_exclusions_are_not_clearable() -> None:
    excluded = _report(policy=ContextPolicy(clear_exclude_tools=("bash",)))
    assert excluded.clearable > 0  # tool messages carry no name here, so exclusion is by the ToolMessage name
    named = [m.model_copy(update={"name": "bash"}) if isinstance(m, ToolMessage) else m for m in _thread()]
    report = build_report(
        named, policy=ContextPolicy(clear_exclude_tools=("bash",)), meter=TokenMeter(ApproximateCounter())
    )
    assert report.clearable == 0


def test_a_thread_without_measured_calls_needs_a_window() -> None:
    messages = [HumanMessage("hi")]
    with pytest.raises(WindowUnknownError, match="pass model=<the chat model> or policy=ContextPolicy"):
        build_report(messages, thread_id="t")
    report = build_report(messages, policy=ContextPolicy(window=1_000))
    assert (report.window, report.window_source) == (1_000, "override")


def test_html_and_rich_forms_show_the_same_figures() -> None:
    report = _report()
    page = report._repr_html_()
    assert "parser-fix" in page
    assert f"{report.used:,} / 32,000" in page
    assert page.count("<tr>") == len(report.rows()) + 1
    console = Console(record=True, width=100)
    console.print(report)
    screen = console.export_text()
    for name, tokens in report.rows():
        assert name in screen
        assert f"{tokens:,}" in screen
    assert report.gauge in screen


def test_html_escapes_thread_ids() -> None:
    report = build_report(_thread(), thread_id="<script>x</script>", meter=TokenMeter(ApproximateCounter()))
    assert "<script>" not in report._repr_html_()


@pytest.fixture
def thread_on_disk(state_dir: Path) -> Path:
    agent = create_context_agent(scripted_model(["one", "two"], window=8_000, name="fake"), state_dir=state_dir)
    config = {"configurable": {"thread_id": "disk"}}
    agent.invoke({"messages": [("user", "hello")]}, config)
    agent.invoke({"messages": [("user", "again")]}, config)
    agent.checkpointer.conn.close()
    return state_dir


def test_from_a_state_dir_with_spend_from_the_trace(thread_on_disk: Path) -> None:
    report = context_report(thread_on_disk, {"configurable": {"thread_id": "disk"}})
    assert (report.model, report.window, report.calls) == ("fake", 8_000, 2)
    assert report.spend["main"]["calls"] == 2
    assert report.spend["main"]["input_tokens"] > 0


def test_from_an_agent_and_async(thread_on_disk: Path) -> None:
    agent = create_context_agent(scripted_model([], window=8_000, name="fake"), state_dir=thread_on_disk)
    config = {"configurable": {"thread_id": "disk"}}
    report = context_report(agent, config)
    assert report.spend["main"]["calls"] == 2  # the trace beside the checkpoints is found on its own
    agent.checkpointer.conn.close()


async def test_async_report(thread_on_disk: Path) -> None:
    agent = create_context_agent(scripted_model([], window=8_000, name="fake"), state_dir=thread_on_disk)
    report = await acontext_report(agent, {"configurable": {"thread_id": "disk"}})
    agent.checkpointer.conn.close()
    assert report.calls == 2


def test_unknown_thread_and_missing_store(thread_on_disk: Path, tmp_path: Path) -> None:
    with pytest.raises(
        UnknownThreadError, match=r"thread 'nope' has no checkpointed messages here\. Known threads: disk"
    ):
        context_report(thread_on_disk, {"configurable": {"thread_id": "nope"}})
    with pytest.raises(UnknownThreadError, match="no checkpoints at"):
        context_report(tmp_path / "empty", {"configurable": {"thread_id": "disk"}})
    assert not (tmp_path / "empty").exists()  # reading never creates a store
    with pytest.raises(UnknownThreadError, match="names no thread"):
        context_report(thread_on_disk, {"configurable": {}})
