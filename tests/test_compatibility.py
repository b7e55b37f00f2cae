"""The dependency ranges are the tested ones: the lowest pins, the ranges and the compatibility page agree.

CI installs the suite twice — the newest versions the ranges admit, and every direct dependency at its lower bound
(`.ci/lowest.txt`) — so a lower bound in `pyproject.toml` that is not pinned there, or pinned at another version,
would go untested; and a range the docs do not list would be one a reader cannot check.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
FEATURE_EXTRAS = ("plot", "rich", "postgres")
"""The extras a user installs; `dev` adds test tools, of which only the server the tests run is ranged."""
RANGED_DEV = ("langgraph-cli",)


def _ranged() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = [*project["dependencies"]]
    listed += [r for extra in FEATURE_EXTRAS for r in project["optional-dependencies"][extra]]
    listed += [r for r in project["optional-dependencies"]["dev"] if Requirement(r).name in RANGED_DEV]
    requirements = [Requirement(r) for r in listed]
    return {r.name: r for r in requirements if not r.name.startswith("ctxwarden")}


def _lowest() -> dict[str, Version]:
    lines = (ROOT / ".ci" / "lowest.txt").read_text(encoding="utf-8").splitlines()
    pins = [line.split("==") for line in lines if line.strip() and not line.startswith("#")]
    return {name.strip(): Version(version.strip()) for name, version in pins}


def _bound(requirement: Requirement, operator: str) -> Version:
    found = [Version(s.version) for s in requirement.specifier if s.operator == operator]
    assert len(found) == 1, f"{requirement} needs exactly one {operator} bound"
    return found[0]


def test_every_direct_dependency_has_both_bounds() -> None:
    for requirement in _ranged().values():
        assert _bound(requirement, ">=") < _bound(requirement, "<")


def test_lowest_pins_every_direct_dependency_at_its_lower_bound() -> None:
    ranged, lowest = _ranged(), _lowest()
    assert set(lowest) == set(ranged)
    for name, requirement in ranged.items():
        assert lowest[name] == _bound(requirement, ">="), f"{name}: pin {lowest[name]} in .ci/lowest.txt"


def test_ci_runs_the_suite_at_the_lowest_versions() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"pip install -c \.ci/lowest\.txt -e \"\.\[dev\]\"", ci)


def test_the_compatibility_page_lists_every_range_and_its_lowest_version() -> None:
    page = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    table = [line for line in page.splitlines() if line.startswith("| ")]
    rows = {line.split("|")[1].strip().split(" ")[0].replace("\\", ""): line for line in table}
    lowest = _lowest()
    for name, requirement in _ranged().items():
        row = next((line for key, line in rows.items() if key.split("[")[0] == name), None)
        assert row is not None, f"docs/compatibility.md has no row for {name}"
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        assert cells[1] == f"`{requirement.specifier}`" or set(cells[1].strip("`").split(",")) == {
            str(s) for s in requirement.specifier
        }
        assert Version(cells[2]) == lowest[name]
        assert Version(cells[3]) in requirement.specifier
