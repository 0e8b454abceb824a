"""Packaging that is true (#40 item 5, #64 item 8): every package the code imports is
declared, the extras agree with the pinned requirements, a missing extra is named, the
library imports and answers without its extras, the wheel installs in a clean venv with and
without the app's extra, and the Python versions claimed are the ones the tools check and
the tests run on."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# the extras a library user may leave out, and the modules they provide
EXTRAS_MODULES = ("streamlit", "altair", "xgboost", "catboost", "onnx", "onnxruntime", "gurobipy", "dask",
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
    # and on the next (make test's second run, the library's tests on Python 3.12)
    assert sys.version_info[:2] in ((3, minor), (3, minor + 1)), sys.version_info
    makefile = (ROOT / "Makefile").read_text()
    assert f"PYTHON_NEXT ?= python3.{minor + 1}" in makefile


def _pins() -> dict[str, str]:
    """The pinned versions of requirements.txt and requirements-dev.txt by distribution name."""
    pins = {}
    text = (ROOT / "requirements.txt").read_text() + "\n" + (ROOT / "requirements-dev.txt").read_text()
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;#]+)", line.strip())
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(3)
    return pins


def test_the_extras_agree_with_the_pinned_requirements():
    """Every requirement of pyproject.toml (its dependencies and its extras, as they apply on this
    platform) is pinned in requirements.txt (requirements-dev.txt for the
    PostgreSQL driver the tests use) at a version it admits: what the tests run is what a
    user installs. XGBoost is pinned as its CPU-only build, the one [formats] asks for here."""
    from packaging.requirements import Requirement

    pins, project = _pins(), PYPROJECT["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += [r for r in extra if not r.startswith(project["name"])]
    wrong = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = req.name.lower().replace("_", "-")
        if name not in pins:
            wrong.append(f"{text}: not pinned in the requirements")
        elif not req.specifier.contains(pins[name], prereleases=True):
            wrong.append(f"{text}: the requirements pin {pins[name]}")
    assert not wrong, wrong


def test_each_optional_package_is_named_with_its_extra():
    """core.errors.EXTRA_OF names, for each optional module, an extra of pyproject.toml that installs it."""
    from core.errors import EXTRA_OF

    extras = PYPROJECT["project"]["optional-dependencies"]
    dists = packages_distributions()
    for module, extra in EXTRA_OF.items():
        assert extra in extras, (module, extra)
        names = {_name(r) for r in extras[extra]}
        names |= {ALIASES.get(n, n) for n in names}
        provided = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        assert provided & names, (module, extra, provided, names)


def test_a_missing_extra_is_named_with_the_command_that_installs_it():
    code = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "xgboost":
            raise ModuleNotFoundError("No module named 'xgboost'", name="xgboost")
sys.meta_path.insert(0, Blocker())
from core.intake.io import load_model
try:
    load_model(b'{"learner": {"gradient_booster": {}}, "version": [3, 0, 0]}', "m.json")
except ImportError as exc:
    print(type(exc).__name__, "|", exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    name, _, message = out.stdout.strip().partition(" | ")
    assert name == "MissingExtraError", out.stdout
    assert "XGBoost" in message and "pip install 'counterfactual-atlas[formats]'" in message, message


def _uv() -> list[str]:
    uv = Path(sys.executable).with_name("uv")
    return [str(uv)] if uv.exists() else [sys.executable, "-m", "uv"]


def _clean_env() -> dict[str, str]:
    """This environment without what would make a new venv's Python find modules elsewhere than in
    the venv (``PYTHONPATH`` naming the checkout, or a folder of stray modules; ``PYTHONHOME``,
    ``PYTHONSTARTUP``) or a venv's install go to another (``VIRTUAL_ENV``)."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_the_wheel_installs_in_a_clean_venv_without_extras_and_with_the_app(tmp_path):
    """The wheel built from this checkout, installed in a new venv (uv, from its cache where the
    project's own install filled it): without extras the library answers and names a missing
    extra; with [app] Streamlit and the app's package import. The app's pages are not in the
    wheel: the README says the app runs from a checkout (make run)."""
    dist = tmp_path / "dist"
    env = _clean_env()
    build = subprocess.run([*_uv(), "build", "--wheel", "--out-dir", str(dist), str(ROOT)],
                           capture_output=True, text=True, timeout=600, env=env)
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = next(dist.glob("counterfactual_atlas-*.whl"))
    import zipfile
    assert "core/py.typed" in zipfile.ZipFile(wheel).namelist()      # typed for its users (PEP 561)
    code = """
import numpy as np, pandas as pd
from sklearn.ensemble import RandomForestClassifier
from core import from_model, optimal_counterfactual
from core.errors import MissingExtraError, need
rng = np.random.default_rng(0)
X = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
y = (X.a + X.b > 0).astype(int)
rf = RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y)
r = optimal_counterfactual(from_model(rf), X.to_numpy()[0], 1 - int(y[0]), model=rf)
assert r.status == "optimal", r.status
try:
    need("gurobipy", "the Gurobi backend")
except MissingExtraError as exc:
    assert "[gurobi]" in str(exc), exc
import core, pathlib
print(pathlib.Path(core.__file__).parent.parent.name)
"""
    # the versions requirements.txt pins (the ones tested), not the index's newest of the day: the
    # install is the same on every machine and every day, and comes from the cache the project's filled
    pins = tmp_path / "pins.txt"
    pins.write_text("\n".join(line for line in (ROOT / "requirements.txt").read_text().splitlines()
                              if "==" in line and not line.lstrip().startswith("#")) + "\n")
    for extra, check in (("", code), ("[app]", "import streamlit, altair, dashboard.ui; print('app')")):
        venv = tmp_path / f"venv{len(extra)}"
        made = subprocess.run([*_uv(), "venv", "-q", "--python", sys.executable, str(venv)],
                              capture_output=True, text=True, timeout=300, env=env)
        assert made.returncode == 0, made.stderr[-2000:]
        py = venv / "bin" / "python"
        inst = subprocess.run([*_uv(), "pip", "install", "-q", "--python", str(py), "-c", str(pins), f"{wheel}{extra}"],
                              capture_output=True, text=True, timeout=900, env=env)
        assert inst.returncode == 0, inst.stderr[-3000:]
        run = subprocess.run([str(py), "-c", check], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                             env=env)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.strip().splitlines()[-1] == ("site-packages" if not extra else "app"), run.stdout
