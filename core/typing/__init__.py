"""The names ``core``'s signatures use for what they take and give (a package, as OCEAN's ``ocean/typing``).

A signature says what a value *is* with one of these names instead of ``Any``:

==============  ===============================================================================
``FloatArray``  an ndarray of float64 (rows of features, costs, bounds, predicted values)
``IntArray``    an ndarray of integers (indices: features, nodes, leaves, rows)
``BoolArray``   an ndarray of booleans (masks)
``Row``         one row as given: a 1-D array-like of ``n_features`` numbers, a Series
                (by feature name) or a one-row table (``core.model.features.as_row``)
``Rows``        rows as given: an array-like of shape (n_samples, n_features), a list
                of rows, or a DataFrame (``core.model.features.as_table`` reads them)
``Label``       a class label as the model gives it (an int, a str, a bool, a numpy scalar)
``TargetSpec``  the outcome a query asks for: a class label, or an interval ``(lo, hi)``
                of a regressor's predictions (``core.counterfactual.make_target`` reads it)
``FeatureKey``  a feature by its name or its column index
``Norm``        a cost's norm: ``"l0"``, ``"l1"``, ``"l2"``, ``"linf"`` or a mix ``{"l0": 0.1, "l1": 1}``
``Weights``     per-feature cost weights: None, a number, an array (d,) or (d, 2) (decrease,
                increase), or a mapping feature -> weight or (decrease, increase)
``ModelLike``   a raw model of any library (scikit-learn, XGBoost, LightGBM, CatBoost, ONNX,
                a pipeline, a callable, a ``TreeEnsemble``): ``Any`` on purpose, the one
                place a public signature takes an arbitrary object, read by duck typing
``Features``    features a query names (``fixed``, ``increase_only``, ``decrease_only``,
                a group): None (no feature), one ``FeatureKey`` or a sequence of them
                (``core.model.features.feature_indices`` reads them)
==============  ===============================================================================

Imports numpy and the standard library only, so that every package, the model
included, may use it (``tests/test_layering.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["FloatArray", "IntArray", "BoolArray", "Row", "Rows", "Label", "TargetSpec", "FeatureKey",
           "Norm", "Weights", "ModelLike", "ArrayLike", "Features"]

FloatArray: TypeAlias = NDArray[np.float64]
IntArray: TypeAlias = NDArray[np.integer[Any]]
BoolArray: TypeAlias = NDArray[np.bool_]

Row: TypeAlias = ArrayLike
Rows: TypeAlias = ArrayLike

Label: TypeAlias = Hashable
TargetSpec: TypeAlias = Hashable | Sequence[float]

FeatureKey: TypeAlias = str | int | np.integer[Any]

Norm: TypeAlias = str | Mapping[str, float]
Weights: TypeAlias = ArrayLike | Mapping[str, ArrayLike] | Mapping[int, ArrayLike] | None

ModelLike: TypeAlias = Any

Features: TypeAlias = FeatureKey | Iterable[FeatureKey] | None
