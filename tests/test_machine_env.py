"""The tests hold on a machine whose environment configures the app otherwise (a deployment's
``ATLAS_PUBLIC=1``, a small ``ATLAS_MAX_ROWS``, Streamlit's ``STREAMLIT_*`` options): conftest
leaves the app's settings at their defaults, and keeps the tests' own knobs."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import TESTS


def test_the_machines_app_settings_do_not_reach_the_tests():
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); import conftest; "
            "print(sorted(n for n in os.environ if n.startswith(('ATLAS_', 'STREAMLIT_'))))")
    env = {**os.environ, "ATLAS_PUBLIC": "1", "ATLAS_MAX_ROWS": "500", "STREAMLIT_SERVER_BASE_URL_PATH": "atlas",
           "ATLAS_PG_BIN": "/opt/pg/bin", "ATLAS_SHOTS": "/tmp/shots"}
    out = subprocess.run([sys.executable, "-c", code, str(TESTS)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == str(["ATLAS_HISTORY_URL", "ATLAS_PG_BIN", "ATLAS_SHOTS"])
