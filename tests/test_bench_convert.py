"""The conversion command rebuilds a SWE-agent corpus: the first N sessions of each run, by name, long enough."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ctxwarden.bench.convert import main
from ctxwarden.replay import load_recording

TRAJ = Path(__file__).parent / "fixtures" / "sweagent-small.traj"  # 5 steps that acted


def _runs(tmp_path: Path) -> list[Path]:
    files = []
    for run in ("20240825_SWE-agent_a", "20240825_SWE-agent_b"):
        folder = tmp_path / "raw" / run / "trajs"
        folder.mkdir(parents=True)
        for name in ("z__z-2.traj", "a__a-1.traj", "m__m-3.traj"):
            files.append(Path(shutil.copy(TRAJ, folder / name)))
    return files


def test_convert_keeps_the_first_sessions_of_each_run_by_name(tmp_path: Path, capsys) -> None:
    files = _runs(tmp_path)
    out = tmp_path / "out"
    assert main([str(out), *map(str, files), "--min-steps", "5", "--per-model", "2", "--demo-in", "user"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "20240825_SWE-agent_a__a__a-1.json",
        "20240825_SWE-agent_a__m__m-3.json",
        "20240825_SWE-agent_b__a__a-1.json",
        "20240825_SWE-agent_b__m__m-3.json",
    ]
    converted = load_recording(out / "20240825_SWE-agent_a__a__a-1.json")
    assert "--- DEMONSTRATION ---" in converted.turns[0].user.content
    assert converted.tool_names == load_recording(TRAJ).tool_names
    assert "4 sessions" in capsys.readouterr().out


def test_convert_skips_sessions_shorter_than_min_steps(tmp_path: Path) -> None:
    files = _runs(tmp_path)
    out = tmp_path / "out"
    main([str(out), *map(str, files), "--min-steps", "6"])
    assert list(out.iterdir()) == []
    assert json.loads(TRAJ.read_text())["trajectory"]  # the fixture itself has steps; only the bar excluded them
