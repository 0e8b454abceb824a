"""core's packages stand in layers (issue #28 item 1): the model below everything,
intake above the analyses that only read the model.

Read from the source (every import, at the top or inside a function: a local import
hides a dependency, it does not remove it):

* nothing in the model, the kernel (cells, solvers, optimal) or the analyses
  (regions, tcrex, rules, compression) imports ``core.intake``: a fitted model reaches them
  through :func:`core.model.as_ensemble` and the converter ``core`` registers;
* ``core.model`` imports nothing of core but itself, ``core.errors``,
  ``core.jsonable`` and ``core.typing`` (which imports nothing of core);
* ``core/`` holds at most 12 modules directly; the rest live in packages.

And run: every core module imports first, in a core of its own (a cycle through a
package's ``__init__`` shows only in the order a page or a worker happens to use).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"

BELOW_INTAKE = ("model", "cells", "solvers", "surrogate", "optimal", "regions.py", "tcrex.py", "rules", "compression")
MODEL_MAY_IMPORT = ("core.model", "core.errors", "core.jsonable", "core.typing")


def _files(*names: str) -> list[Path]:
    out = []
    for name in names:
        path = CORE / name
        out += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return out


def _core_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every core module the file imports; ``from core import x``
    names ``core.x``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "core":
                out += [(node.lineno, f"core.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.append((node.lineno, "." * node.level + (node.module or "")))   # relative: refused below
    return [(line, m) for line, m in out if m == "core" or m.startswith(("core.", "."))]


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_model_kernel_and_analyses_never_import_intake():
    files = _files(*BELOW_INTAKE)
    assert len(files) >= 30 and CORE / "model" / "ensemble.py" in files, files
    offenders = [f"{path.relative_to(ROOT)}:{line}: {m}" for path in files for line, m in _core_imports(path)
                 if _within(m, ("core.intake",)) or m.startswith(".")]
    assert not offenders, "\n".join(offenders)


def test_the_model_imports_only_itself_errors_and_jsonable():
    offenders = [f"{path.relative_to(ROOT)}:{line}: {m}" for path in _files("model")
                 for line, m in _core_imports(path) if not _within(m, MODEL_MAY_IMPORT)]
    assert not offenders, "\n".join(offenders)


def test_core_holds_at_most_twelve_modules_directly():
    top = sorted(p.name for p in CORE.glob("*.py"))
    assert "__init__.py" in top and len(top) <= 12, top


@pytest.mark.slow
def test_every_core_module_imports_first():
    mods = []
    for path in sorted(CORE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods.append(".".join(parts))
    assert "core.figures" in mods and "core.audit.metrics" in mods, mods
    # one interpreter (the libraries load once), a fresh core for each module
    code = ("import importlib, importlib.machinery, sys, traceback\n"
            # each source compiled once, its code run afresh at every import (see below)
            "compiled = {}\n"
            "compile_source = importlib.machinery.SourceFileLoader.source_to_code\n"
            "def compile_once(self, data, path, *, _optimize=-1):\n"
            "    if (path, data) not in compiled:\n"
            "        compiled[path, data] = compile_source(self, data, path, _optimize=_optimize)\n"
            "    return compiled[path, data]\n"
            "importlib.machinery.SourceFileLoader.source_to_code = compile_once\n"
            "bad = []\n"
            f"for m in {mods!r}:\n"
            "    for name in [n for n in sys.modules if n == 'core' or n.startswith('core.')]:\n"
            "        del sys.modules[name]\n"
            "    try:\n"
            "        importlib.import_module(m)\n"
            "    except Exception:\n"
            "        bad.append(m + ': ' + traceback.format_exc(limit=-1).strip().splitlines()[-1])\n"
            "print('\\n'.join(bad))\n"
            "sys.exit(1 if bad else 0)\n")
    # each module's code is compiled once, not once per import: kept in the interpreter's memory,
    # so that PYTHONDONTWRITEBYTECODE (set on these machines) holds and the libraries' own compiled
    # files are read (a PYTHONPYCACHEPREFIX of the test's own hid them: every library compiled again)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


# third-party libraries and core's own modules that only a model of theirs, a page or a cluster needs
HEAVY = ("xgboost", "lightgbm", "catboost", "onnx", "onnxruntime", "gurobipy", "streamlit", "dask", "distributed")


def _imported(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"{statement}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.mark.parametrize("statement", ["import core", "import core.model", "from core.model import as_ensemble"])
def test_importing_core_imports_no_parser_and_no_optional_library(statement):
    mods = _imported(statement)
    assert "core" in mods and "numpy" in mods
    heavy = [m for m in mods if m.split(".")[0] in (*HEAVY, "sklearn")]   # scikit-learn: 2.5 s, on first use
    parsers = [m for m in mods if m.startswith(("core.intake", "core.surrogate"))]
    assert not heavy and not parsers, heavy + parsers
    if statement != "import core":
        assert len([m for m in mods if m.startswith("core")]) <= 12, [m for m in mods if m.startswith("core")]


def test_not_fitted_error_is_made_on_first_use_and_is_scikit_learns_too():
    """``core.errors.NotFittedError`` subclasses scikit-learn's, made when first asked for (so
    ``import core`` does not import scikit-learn): it is one class, caught as either, and pickles
    (a batch's worker sends it back)."""
    import pickle

    from sklearn.exceptions import NotFittedError as Theirs

    import core.errors
    from core.errors import AtlasError, NotFittedError

    assert core.errors.NotFittedError is NotFittedError and issubclass(NotFittedError, (AtlasError, Theirs))
    assert NotFittedError.__module__ == "core.errors" and NotFittedError.__qualname__ == "NotFittedError"
    with pytest.raises(Theirs):
        raise NotFittedError("fit it first")
    back = pickle.loads(pickle.dumps(NotFittedError("fit it first")))
    assert type(back) is NotFittedError and str(back) == "fit it first"
    with pytest.raises(AttributeError):
        core.errors.NoSuchError  # noqa: B018


def test_a_model_reaches_its_parser_on_first_use_only():
    code = ("import sys, numpy as np\n"
            "from sklearn.ensemble import RandomForestClassifier\n"
            "from core.model import as_ensemble\n"
            "X = np.random.default_rng(0).normal(size=(60, 3)); y = (X[:, 0] > 0).astype(int)\n"
            "before = set(sys.modules)\n"
            "ens = as_ensemble(RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y))\n"
            "assert (ens.predict(X) == RandomForestClassifier(n_estimators=3, max_depth=2, "
            "random_state=0).fit(X, y).predict(X)).all()\n"
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    new = r.stdout.split()
    assert "core.intake.models" in new and "core.intake.parsing.sklearn" in new
    assert not [m for m in new if m.split(".")[0] in HEAVY or m.startswith(("core.intake.parsing.xgboost",
                                                                             "core.intake.parsing.lightgbm",
                                                                             "core.intake.parsing.onnx"))], new
