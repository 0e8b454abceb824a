"""core never imports Streamlit: it must run from a script, a notebook or a worker."""

import subprocess
import sys


def test_core_imports_without_streamlit():
    code = ("import sys, core, core.ensemble, core.io, core.schema, core.demo, core.parsing.sklearn, "
            "core.parsing.xgboost, core.parsing.lightgbm; "
            "bad = [m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
