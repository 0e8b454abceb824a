"""A test past its time limit fails alone (issue 37, item 9).

A fresh clone's test run on a busy machine stopped at 34%: the intake fuzz sweep
passed the 900 s limit of one test, and pytest-timeout's "thread" method ended the
whole run. With the "signal" method the project now sets, the alarm fails that test
and the run goes on; a model file being read in the sandbox when the alarm comes
has its child process killed, not left running. Both are checked on a small run of
pytest with the project's own configuration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

INNER = '''
import os
import time

import pytest

from core.intake.sandbox import load_vetted


@pytest.mark.timeout(3)
def test_hangs():
    time.sleep(60)


def test_runs_after_it():
    assert True


@pytest.mark.timeout(8)
def test_hangs_while_a_file_is_read():
    open(os.environ["ATLAS_PID_FILE"], "w").write("reading")
    load_vetted(b"{}", "m.json", time_limit=120, _hook="hang")


def test_no_reader_is_left_behind():
    import psutil

    time.sleep(1)
    left = [p.cmdline() for p in psutil.Process().children(recursive=True)
            if "core.intake.sandbox" in " ".join(p.cmdline())]
    assert not left, left
'''


# slow: ~14 s, most of it waiting for the inner tests' limits; marked so that it starts early
# (conftest's order), where other files' work fills that wait, not last in a run that waits on it
@pytest.mark.slow
def test_a_test_past_its_limit_fails_alone_and_its_sandbox_child_is_killed(tmp_path):
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ATLAS_SANDBOX_WARM": "0",
           "ATLAS_PID_FILE": str(tmp_path / "reading")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                          str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert (tmp_path / "reading").exists(), out            # the third test did start reading a file
    assert "2 failed, 2 passed" in out, out                  # the run went on past both time-outs
    assert "Timeout" in out, out
