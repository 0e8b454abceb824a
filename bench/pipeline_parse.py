"""Benchmark: reading a scikit-learn Pipeline as one tree ensemble on its raw columns.

Prints JSON. The pipeline (one-hot categories, scaled numbers, a random forest last) is
read by ``core.intake.models.from_model``; every split of the forest on a scaled column is
carried back to the raw column by bisection on the pipeline's own transform (exact to the
float). The reference, in the same process: reading the forest alone (no pipeline), so the
ratio is what the pipeline's inversion adds. Each figure is the fastest of 3 runs.

Data: the carried Adult sample (tests/data/adult_sample.csv, 10,000 rows), its five
numerical columns scaled (StandardScaler, MinMaxScaler, RobustScaler) and four
label-encoded columns one-hot encoded; RF(100 trees, depth 8).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import best_of  # noqa: E402

from core.intake.models import from_model  # noqa: E402
from core.intake.workspace import build_workspace  # noqa: E402


def main() -> dict:
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, RobustScaler, StandardScaler

    df = pd.read_csv(ROOT / "tests" / "data" / "adult_sample.csv", header=[0, 1]).droplevel(1, axis=1)
    y = df.pop("Class").to_numpy()
    num = ["Age", "EducationNumber", "CapitalGain", "CapitalLoss", "HoursPerWeek"]
    cat = ["Sex", "WorkClass", "MaritalStatus", "Relationship"]
    X = df[num + cat]
    pre = ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), cat),
                             ("std", StandardScaler(), num[:2]), ("mm", MinMaxScaler(), num[2:4]),
                             ("rob", RobustScaler(), num[4:])])
    pipe = Pipeline([("pre", pre), ("rf", RandomForestClassifier(100, max_depth=8, random_state=0))]).fit(X, y)
    ens = from_model(pipe)
    ws = build_workspace(X.assign(Class=y), "Class", pipe, name="bench")    # the app's own reading of the table
    assert np.array_equal(ws.predictions, pipe.predict(X)), "the read pipeline disagrees with the pipeline"
    t_pipe = best_of(lambda: from_model(pipe))
    t_forest = best_of(lambda: from_model(pipe.named_steps["rf"]))
    n_thresholds = int(sum(np.isfinite(t.threshold).sum() for t in ens.trees))
    return {"rows": len(X), "numerical_columns": len(num), "one_hot_columns": len(cat), "trees": 100,
            "split_thresholds": n_thresholds, "pipeline_s": round(t_pipe, 4), "forest_alone_s": round(t_forest, 4),
            "pipeline_over_forest": round(t_pipe / t_forest, 2), "same_predictions": True}


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
