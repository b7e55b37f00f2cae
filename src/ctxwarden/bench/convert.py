"""`python -m ctxwarden.bench.convert`: a corpus of another scaffold's sessions, as message lists the bench replays.

    python -m ctxwarden.bench.convert OUT_DIR FILE.traj ... [--min-steps 20] [--per-model 8] [--demo-in system|user]

Recorded sessions of other scaffolds often come without a stated licence, so the bench does
not ship them: this command rebuilds a corpus from the public files. It reads original
SWE-agent `.traj` files, keeps per model run (the folder holding the files, or the one above
a `trajs/` folder) the first `--per-model` by file name that have at least `--min-steps`
steps, and writes each as an OpenAI message list, `OUT_DIR/<run>__<name>.json`, with the
demonstration where `--demo-in` says. The messages are those `load_recording` gives for the
`.traj` itself.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ctxwarden.errors import TrajectoryFormatError
from ctxwarden.replay.sweagent import DEMO_PLACES, is_sweagent_traj, sweagent_messages, sweagent_steps


def run_name(path: Path) -> str:
    """The model run a `.traj` belongs to: its folder, or the folder above a `trajs/` folder."""
    parent = path.parent
    return parent.parent.name if parent.name == "trajs" else parent.name


def convert(
    files: Sequence[Path], out: Path, *, min_steps: int, per_model: int, demo_in: str = "system"
) -> dict[str, list[Path]]:
    """Write the selected sessions to `out`; return the files written, by run."""
    if demo_in not in DEMO_PLACES:
        raise TrajectoryFormatError(f"--demo-in {demo_in!r}: use 'system' or 'user'.")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(files, key=lambda p: (run_name(p), p.name)):
        run = run_name(path)
        if len(written[run]) >= per_model:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TrajectoryFormatError(f"{path}: cannot be read as JSON ({exc}).") from exc
        if not is_sweagent_traj(data):
            raise TrajectoryFormatError(f"{path}: is not an original SWE-agent .traj (no history and trajectory).")
        if len(sweagent_steps(data)) < min_steps:
            continue
        messages = sweagent_messages(data, demo_in=demo_in, source=str(path))
        target = out / f"{run}__{path.stem}.json"
        target.write_text(json.dumps({"messages": messages}), encoding="utf-8")
        written[run].append(target)
    return dict(written)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxwarden.bench.convert", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the message lists to")
    parser.add_argument("files", nargs="+", type=Path, help="SWE-agent .traj files")
    parser.add_argument("--min-steps", type=int, default=20, help="keep sessions with at least this many steps")
    parser.add_argument("--per-model", type=int, default=8, help="keep the first N of each run, by file name")
    parser.add_argument("--demo-in", choices=DEMO_PLACES, default="system", help="where the demonstration goes")
    args = parser.parse_args(argv)
    written = convert(args.files, args.out, min_steps=args.min_steps, per_model=args.per_model, demo_in=args.demo_in)
    for run, paths in sorted(written.items()):
        print(f"{run}: {len(paths)} sessions")
    print(f"{sum(len(p) for p in written.values())} sessions -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

__all__ = ["convert", "main", "run_name"]
