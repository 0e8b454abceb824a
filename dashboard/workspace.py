"""The loaded dataset + model + schema the pages work on (no Streamlit here).

``build_workspace`` is the one place where a table and a model become a
checked ``Workspace``: the data is prepared (numeric, one-hot), the model is
converted to a ``TreeEnsemble`` and verified, the columns are matched to the
model's features, and a schema is inferred. Any failure raises a
``ValueError`` subclass with a user-facing message, so the app can keep the
previous workspace.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from core.ensemble import TreeEnsemble, from_model
from core.io import prepare_data
from core.schema import Schema, infer_schema, validate


@dataclass(frozen=True)
class Workspace:
    name: str
    raw: pd.DataFrame
    X: pd.DataFrame          # features in model order
    y: pd.Series | None      # target as in the file
    target: str | None
    model: Any
    ensemble: TreeEnsemble
    schema: Schema
    data_sha256: str = ""
    model_sha256: str = ""
    notes: tuple[str, ...] = ()
    model_info: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def predictions(self) -> np.ndarray:
        """The model's output on every row, computed once per workspace."""
        return self.ensemble.predict(self.X.to_numpy(dtype=float))

    def with_schema(self, schema: Schema) -> "Workspace":
        if schema.names != list(self.X.columns):
            raise ValueError(
                f"The schema's features {schema.names[:6]}… do not match the data's columns "
                f"{list(self.X.columns)[:6]}…; load a schema saved for this dataset."
            )
        return replace(self, schema=schema)

    def summary(self) -> dict[str, Any]:
        s = self.ensemble.summary()
        s.update(self.model_info)
        if self.y is not None and self.ensemble.task == "classification":
            pred = self.predictions
            y = self.y.to_numpy()
            try:
                s["accuracy on this data"] = round(float(np.mean(pred.astype(y.dtype) == y)), 4)
            except (TypeError, ValueError):
                s["accuracy on this data"] = round(float(np.mean(pred.astype(str) == y.astype(str))), 4)
        elif self.y is not None and self.ensemble.task == "regression":
            y = self.y.to_numpy(dtype=float)
            ss = float(np.sum((y - y.mean()) ** 2)) or 1.0
            s["R² on this data"] = round(1 - float(np.sum((y - self.predictions) ** 2)) / ss, 4)
        return s


def build_workspace(df: pd.DataFrame, target: str | None, model: Any, *, name: str,
                    data_sha256: str = "", model_sha256: str = "", drop_missing: bool = False,
                    model_info: dict[str, Any] | None = None,
                    schema: Schema | None = None) -> Workspace:
    prep = prepare_data(df, target, drop_missing=drop_missing)
    ens = from_model(model)
    if ens.task == "anomaly":
        raise ValueError("An Isolation Forest is a plausibility model, not a model to audit; "
                         "load a classifier or regressor (you can use an Isolation Forest in the analyses).")
    X = validate(prep.X, ens)
    if list(X.columns) != list(ens.feature_names):  # matched by position: keep the data's names
        ens = from_model(ens, feature_names=[str(c) for c in X.columns])
    X = pd.DataFrame(X.to_numpy(dtype=float), columns=list(ens.feature_names))
    if schema is None or schema.names != list(X.columns):
        kinds = {c: k for c, k in prep.kinds.items() if c in X.columns}
        schema = infer_schema(X, kinds=kinds, groups=prep.groups)
        schema = Schema(schema.features, target=target)
    return Workspace(name=name, raw=df, X=X, y=prep.y, target=target, model=model, ensemble=ens,
                     schema=schema, data_sha256=data_sha256, model_sha256=model_sha256,
                     notes=tuple(prep.notes), model_info=dict(model_info or {}))
