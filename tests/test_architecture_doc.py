"""docs/architecture.md stays true: the layer table is `LAYERS`, and every ctxwarden name it mentions exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from test_layers import LAYERS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _resolve(dotted: str) -> object | None:
    """The module or attribute `dotted` names (`ctxwarden.a.b.Name`), or `None`."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute, None)
            if found is None:
                return None
        return found
    return None


def test_the_layer_table_is_the_tested_order() -> None:
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", PAGE.read_text(encoding="utf-8"), flags=re.M)
    table = [tuple(re.findall(r"`([\w]+)`", units)) for _number, units in rows]
    assert [int(number) for number, _units in rows] == list(range(len(rows)))
    assert table == LAYERS


def test_every_ctxwarden_name_the_page_mentions_exists() -> None:
    names = set(re.findall(r"`(ctxwarden(?:\.\w+)+)`", PAGE.read_text(encoding="utf-8")))
    assert names, "the page names no module"
    assert sorted(name for name in names if _resolve(name) is None) == []
