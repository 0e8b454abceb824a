"""Packaging that is true (#40 item 5): every package the code imports is declared,
the library imports and answers without its extras, and the Python version claimed is
the one the tools check and the tests run on."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# the extras a library user may leave out, and the modules they provide
EXTRAS_MODULES = ("streamlit", "altair", "xgboost", "lightgbm", "catboost", "onnx", "onnxruntime", "gurobipy", "dask",
                  "distributed", "gosdt")


# builds of one package under another name (requirements.txt pins XGBoost's CPU-only build)
ALIASES = {"xgboost-cpu": "xgboost"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> set[str]:
    project = PYPROJECT["project"]
    names = {_name(r) for r in project["dependencies"]}
    for reqs in project.get("optional-dependencies", {}).values():
        names |= {_name(r) for r in reqs if not r.startswith(project["name"])}
    return names


def _imported(package: str) -> set[str]:
    """Top-level modules imported anywhere in ``package`` (module level or in functions)."""
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_package_the_code_imports_is_declared():
    dists = packages_distributions()
    local = {"core", "dashboard", "pages"}
    missing = []
    for module in sorted(_imported("core") | _imported("dashboard")):
        if module in local or module in sys.stdlib_module_names or module.startswith("_"):
            continue
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        names |= {ALIASES.get(n, n) for n in names}
        if not names & _declared():
            missing.append(f"{module} (distribution {sorted(names)})")
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_library_imports_and_answers_without_its_extras():
    code = f"""
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {EXTRAS_MODULES!r}:
            raise ImportError("not installed: " + name)
sys.meta_path.insert(0, Blocker())
import numpy as np
from sklearn.ensemble import RandomForestClassifier
import core
from core import counterfactual_set, fcca, from_model, infer_schema, optimal_counterfactual, run_audit, TCREx
import pandas as pd
rng = np.random.default_rng(0)
X = pd.DataFrame({{"a": rng.normal(size=300), "b": rng.normal(size=300), "g": rng.integers(0, 2, 300) * 1.0}})
y = (X.a + X.b > 0).astype(int)
rf = RandomForestClassifier(8, max_depth=3, random_state=0).fit(X, y)
ens = from_model(rf)
A = X.to_numpy()
r = optimal_counterfactual(ens, A[0], 1 - int(y[0]), model=rf)
assert r.status == "optimal" and int(rf.predict(pd.DataFrame([r.x], columns=X.columns))[0]) == 1 - int(y[0])
audit = run_audit(ens, A, schema=infer_schema(X, protected=["g"]), target=1, max_rows=10, n_jobs=1,
                  n_perm=50, n_boot=50, tcrex=False, local_rules_per_group=0)
assert len(audit.rows) == 10
bad = sorted(m for m in sys.modules if m.split(".")[0] in {EXTRAS_MODULES!r})
assert not bad, bad
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_the_python_claimed_is_the_one_checked_and_tested():
    lowest = re.fullmatch(r">=\s*3\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert lowest, PYPROJECT["project"]["requires-python"]
    minor = int(lowest.group(1))
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py3{minor}"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == f"3.{minor}"
    # the tests run on the lowest version claimed (a fresh clone's make test uses python3 here)
    assert sys.version_info[:2] == (3, minor), sys.version_info
