"""core never imports Streamlit: it must run from a script, a notebook or a worker.

Every module under ``core/`` is imported (found by walking the package, so a
new module is checked without editing this test), then no ``streamlit``
module may be loaded; no ``core`` module imports from ``dashboard`` or
``pages`` (the dependency direction is pages -> dashboard -> core); and the
core modules import each other without a cycle.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _core_modules() -> list[str]:
    mods = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods.append(".".join(parts))
    return mods


def test_every_core_module_imports_without_streamlit():
    mods = _core_modules()
    assert len(mods) >= 40 and "core.optimal" in mods and "core.cells.problem" in mods, mods
    code = ("import importlib, sys\n"
            f"for m in {mods!r}:\n"
            "    importlib.import_module(m)\n"
            "bad = [m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.')]\n"
            "print(bad)\n"
            "sys.exit(1 if bad else 0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_core_never_imports_the_ui_layers():
    offenders = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                if n.split(".")[0] in ("streamlit", "dashboard", "pages"):
                    offenders.append(f"{path.relative_to(ROOT)}: {n}")
    assert not offenders, offenders


def _import_graph() -> dict[str, set[str]]:
    """Every core module -> the core modules it imports, at the top or inside
    functions (a local import only hides a cycle; it does not remove it).
    ``from core.x import y`` names core.x (or core.x.y when that is a module)."""
    mods = set(_core_modules())
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m in mods:
        path = ROOT / (m.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / m.replace(".", "/") / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for n in names:
                if n in mods and n != m and not m.startswith(n + "."):   # a package's own __init__ is no edge
                    graph[m].add(n)
    return graph


def test_core_has_no_import_cycles():
    graph = _import_graph()
    assert "core.cells" in graph["core.optimal"] and "core.model" in graph["core.cells.problem"], graph
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(path[path.index(n):] + [n] if n in path else [m, n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)
