"""The package's layers, read from the source: each imports only what lies below it.

From the bottom: ``corral.errors``, ``corral.plugin_api``, ``corral._version`` and
``corral._lazy`` (nothing from corral); ``corral.registry`` (those alone); ``corral.core`` (the
registry and those, never the plugins); then the plugins and the public face.
No module of the core or the registry imports names from the face
(``from corral import X``), which re-exports what lies below it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import corral

PACKAGE = Path(corral.__file__).parent
BASE = ("corral.errors", "corral.plugin_api", "corral._version", "corral._lazy")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (lazy imports inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def modules_under(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def below(module: str, *allowed: str) -> bool:
    return not module.startswith("corral") or any(module == a or module.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize("module", BASE)
def test_the_base_imports_nothing_from_corral(module: str) -> None:
    path = PACKAGE / f"{module.removeprefix('corral.')}.py"
    assert {m for m in imported_modules(path) if m.startswith("corral")} == set()


def test_the_registry_depends_on_nothing_above_it() -> None:
    for path in modules_under("registry"):
        wrong = {m for m in imported_modules(path) if not below(m, "corral.registry", *BASE)}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_the_core_imports_neither_the_plugins_nor_the_public_face() -> None:
    for path in modules_under("core"):
        wrong = {m for m in imported_modules(path) if not below(m, "corral.core", "corral.registry", *BASE)}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_importing_the_registry_imports_no_heavy_library() -> None:
    code = "import sys, corral.registry; print(sorted(m for m in ('torch', 'gymnasium', 'ray') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
