"""A LightGBM model trained on data with gaps writes ``inf`` thresholds (found by an
outside trial for issue 41, item 6).

On columns with missing values LightGBM learns splits that send every number left and
NaN to their default side, and saves their threshold as ``inf`` (``1e300`` in
``dump_model``). A data scientist's breast-cancer model with 15% of four columns
missing was refused as damaged by the text check, and once past it, refused again by
the verification: the parser read the threshold as the number 1e300, so a probe just
above it went right where LightGBM sends it left. Such a split is now the split on
missing values only that scikit-learn's forests have too, read as LightGBM reads it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from core.errors import ModelError
from core.intake import io
from core.intake.models import from_model
from core.intake.sandbox import load_vetted
from core.model.tree import MISSING_ONLY


@pytest.fixture(scope="module")
def gappy_model(tmp_path_factory):
    import lightgbm as lgb
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer(as_frame=True)
    X = data.data.copy()
    rng = np.random.default_rng(42)
    for c in ["mean radius", "worst texture", "mean concavity", "worst area"]:
        X.loc[rng.random(len(X)) < 0.15, c] = np.nan
    model = lgb.LGBMClassifier(n_estimators=60, num_leaves=15, verbose=-1, n_jobs=1).fit(X, data.target)
    path = tmp_path_factory.mktemp("lgbm") / "gaps.txt"
    model.booster_.save_model(str(path))
    return path.read_bytes(), X


def test_the_file_holds_inf_thresholds(gappy_model):
    text, _ = gappy_model
    thresholds = [line for line in text.decode().splitlines() if line.startswith("threshold=")]
    assert any("inf" in line.split() or " inf" in line for line in thresholds)


def test_a_model_with_inf_thresholds_is_read_as_lightgbm_reads_it(gappy_model):
    text, X = gappy_model
    booster = io.load_model(text, "gaps.txt")
    ens = from_model(booster)                                    # verified against LightGBM's own scores
    assert any(np.any((t.children_left >= 0) & (t.threshold == MISSING_ONLY)) for t in ens.trees)
    rows = X.to_numpy(float)
    rng = np.random.default_rng(0)
    probe = rows[rng.choice(len(rows), 300)].copy()
    probe[rng.random(probe.shape) < 0.2] = np.nan
    probe[:20, 0] = 1e305                                        # beyond 1e300: still a number, still left
    for Z in (rows, probe):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = booster.predict(pd.DataFrame(Z, columns=X.columns), raw_score=True)
        assert np.allclose(ens.predict_raw(Z)[:, 0], theirs, atol=1e-9)


def test_the_app_reads_it_in_its_sandbox(gappy_model):
    text, _ = gappy_model
    vetted = load_vetted(text, "gaps.txt")
    assert type(vetted.model).__name__ == "Booster"


def test_a_nan_threshold_is_still_damage(gappy_model):
    text, _ = gappy_model
    lines = text.decode().splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("threshold=") and " inf" not in line)
    values = lines[i].split("=", 1)[1].split()
    lines[i] = "threshold=" + " ".join(["nan"] + values[1:])
    with pytest.raises(ModelError, match="infinite or NaN"):
        io.load_model("\n".join(lines).encode(), "gaps.txt")
