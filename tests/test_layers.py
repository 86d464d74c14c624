"""The layers run one way: corpus → core → adapters → bot, with evals and tests on top. Read from the source (every
import, also inside functions and TYPE_CHECKING blocks), so a wrong-way import fails here before it tangles."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# What each layer may not import: everything above it.
ABOVE = {
    "corpus": {"core", "adapters", "bot", "evals", "tests"},
    "core": {"adapters", "bot", "evals", "tests"},
    "adapters": {"bot", "evals", "tests"},
    "bot": {"evals", "tests"},
}


def imported_packages(path: Path) -> list[tuple[str, int]]:
    """(top-level package, line) of every absolute import in the module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return found


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_no_layer_imports_one_above_it(layer):
    modules = sorted((REPO / layer).rglob("*.py"))
    assert modules, f"no modules under {layer}/"
    wrong = [f"{path.relative_to(REPO)}:{line} imports {package}"
             for path in modules for package, line in imported_packages(path) if package in ABOVE[layer]]
    assert wrong == []


def test_relative_imports_are_not_used_to_hide_a_layer():
    relative = [f"{path.relative_to(REPO)}:{node.lineno}" for layer in ABOVE for path in (REPO / layer).rglob("*.py")
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.ImportFrom) and node.level > 0]
    assert relative == []


def test_the_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from bot.settings import Settings\n", encoding="utf-8")
    assert imported_packages(module) == [("bot", 2)]
