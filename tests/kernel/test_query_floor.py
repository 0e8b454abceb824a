"""What an easy query no longer repeats (issue 62 item 1) answers as before: the check of a
point's outputs against the model's is numpy's ``isclose``, and the Gurobi licence is
seen when it is installed or pointed to."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import core.optimal as co
from core.cells.result import _isclose


@pytest.mark.parametrize("ours, theirs", [
    (np.array([[0.3]]), np.array([[0.3 + 1e-7]])),
    (np.array([[0.3]]), np.array([[0.31]])),
    (np.array([[1e6, -2.0]]), np.array([[1e6 + 9.0, -2.0]])),      # within rtol of a large value
    (np.array([[1e6, -2.0]]), np.array([[1e6 + 11.0, -2.0]])),
    (np.array([[np.inf, 1.0]]), np.array([[np.inf, 1.0]])),          # equal infinities are close
    (np.array([[np.inf]]), np.array([[-np.inf]])),
    (np.array([[np.nan]]), np.array([[np.nan]])),
    (np.array([[0.0], [1.0]]), np.array([[0.0, 0.0], [1.0, 1.0 + 1e-3]])),   # one output broadcast
    (np.array([[5e-7]]), np.array([[-4e-7]])),                      # atol near zero
])
def test_the_outputs_check_is_numpys_isclose(ours, theirs):
    want = np.isclose(ours, theirs, rtol=1e-5, atol=1e-6)
    got = _isclose(ours, theirs)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_a_licence_is_seen_when_pointed_to_at_once_and_when_installed_within_the_interval(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gurobipy", types.ModuleType("gurobipy"))   # the package, as installed
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("GRB_LICENSE_FILE", raising=False)
    monkeypatch.setattr(co, "_licence_seen", {})
    if co.os.path.isfile("/opt/gurobi/gurobi.lic"):
        pytest.fail("this machine has a Gurobi licence at /opt/gurobi: the test needs a machine without one")
    assert co.gurobi_licence_present() is False
    lic = tmp_path / "elsewhere.lic"
    lic.write_text("licence\n")
    monkeypatch.setenv("GRB_LICENSE_FILE", str(lic))        # pointed to: seen at once
    assert co.gurobi_licence_present() is True
    monkeypatch.delenv("GRB_LICENSE_FILE")
    assert co.gurobi_licence_present() is False
    (tmp_path / "gurobi.lic").write_text("licence\n")       # installed in the home: seen once the interval
    [(key, (when, _))] = co._licence_seen.items()           # of the last look is over
    co._licence_seen[key] = (when - co.LICENCE_LOOK_EVERY - 0.01, False)
    assert co.gurobi_licence_present() is True
