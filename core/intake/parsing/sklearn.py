"""scikit-learn trees, forests, gradient boosting and Isolation Forest (the
histogram-based gradient boosting models are read by :mod:`core.intake.parsing.hgb`).

scikit-learn casts X to float32 and sends a sample left iff
``float32(x) <= threshold`` (threshold float64); thresholds are converted to
the equivalent float64 bound by :func:`core.model.tree.float32_le_bound`.

Missing values (``Tree._apply_dense`` in scikit-learn's ``tree/_tree.pyx``): a
model whose tags allow NaN (trees, forests and extra trees since 1.3-1.6,
Isolation Forest; not ``GradientBoosting*``, which refuses NaN) sends a NaN at
node ``i`` to the left child iff ``tree_.missing_go_to_left[i]``, before any
comparison: that flag is :attr:`core.model.tree.Tree.missing_left`. The best
splitter also tries "every number left, NaN right" and writes it with the
threshold ``+inf`` (``nan <= inf`` is false; ``missing_go_to_left`` 0): read as
:data:`core.model.tree.MISSING_ONLY`, the largest float64, which sends every
number left just as ``float32(x) <= inf`` does (scikit-learn refuses infinite
inputs), and NaN where its flag says. A node where no NaN was seen in training
still has a flag (the side that got more rows), which scikit-learn follows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.intake.parsing.common import EnsembleHeader, describe_unsupported
from core.intake.parsing.filecheck import PROBABILITY_SLACK
from core.intake.parsing.hgb import parse_hgb
from core.model.ensemble import Link, TreeEnsemble
from core.model.tree import MISSING_ONLY, Tree, float32_floor, float32_le_bound
from core.typing import ModelLike


def _sk_threshold(t: np.ndarray) -> np.ndarray:
    return float32_le_bound(float32_floor(t))


def _tree(est: ModelLike, values: np.ndarray, features: np.ndarray | None = None, nan: bool = False) -> Tree:
    """One fitted tree; with ``nan`` (the model takes missing values) its NaN routing too."""
    tr = est.tree_
    miss = np.asarray(tr.missing_go_to_left, dtype=bool) if nan and hasattr(tr, "missing_go_to_left") else None
    feat = np.asarray(tr.feature, dtype=np.int64)
    leaf = tr.children_left < 0
    if features is not None:
        feat = np.where(leaf, -1, np.asarray(features)[np.where(leaf, 0, feat)])
    thr = np.where(leaf, np.nan, _sk_threshold(np.where(leaf, 0.0, tr.threshold)))
    thr = np.where(np.isposinf(thr), MISSING_ONLY, thr)     # a split on NaN: every number goes left
    return Tree(tr.children_left, tr.children_right, np.where(leaf, -1, feat), thr, values, missing_left=miss)


def _takes_nan(model: ModelLike) -> bool:
    """Whether scikit-learn's ``predict`` takes NaN for this tree model (then each
    node's ``missing_go_to_left`` routes it; otherwise it refuses such rows): its
    ``allow_nan`` tag, which is what its ``predict`` checks (a tree with monotonic
    constraints included: it routes NaN the same way)."""
    try:
        from sklearn.utils import get_tags  # scikit-learn >= 1.6

        return bool(get_tags(model).input_tags.allow_nan)
    except Exception:                     # an older scikit-learn, or a model without tags
        return False


def _names(model: ModelLike, n: int) -> tuple[str, ...]:
    names = getattr(model, "feature_names_in_", None)
    return tuple(str(x) for x in names) if names is not None else tuple(f"x{i}" for i in range(n))


def _check_single_output(model: ModelLike) -> None:
    if getattr(model, "n_outputs_", 1) != 1:
        raise UnsupportedModelError(
            f"{type(model).__name__} was fitted on {model.n_outputs_} targets; "
            "only single-output models are supported."
        )


def _class_values(est: ModelLike) -> np.ndarray:
    """A classifier tree's leaf values: its class fractions, as ``predict_proba``
    returns them (scikit-learn 1.4 and later store them so; no division here, which
    made a leaf of [1e300, 1] the probabilities [1, 0] while scikit-learn said 1e300).
    A leaf whose fractions are no probabilities is refused (:mod:`core.intake.parsing.skopscheck`
    says the same of a file)."""
    v = np.asarray(est.tree_.value[:, 0, :], dtype=np.float64)
    leaves = v[np.asarray(est.tree_.children_left) < 0]
    sums = leaves.sum(axis=1)
    bad = ~np.isfinite(sums) | np.any((leaves < 0) | (leaves > 1), axis=1) | (np.abs(sums - 1) > PROBABILITY_SLACK)
    if bad.any():
        raise ModelError(f"A tree of this {type(est).__name__} holds the class fractions "
                         f"{np.round(leaves[np.argmax(bad)], 6).tolist()[:6]} in a leaf: no probabilities (each "
                         "between 0 and 1, summing to 1), yet its predict_proba returns them as they are. The model "
                         "was edited or saved by a scikit-learn before 1.4 (which stored counts); re-fit it and "
                         "save it again.")
    return v


def parse_sklearn(model: ModelLike) -> TreeEnsemble:
    from sklearn import ensemble as ske  # scikit-learn: imported only when such a model arrives
    from sklearn import tree as skt

    name = type(model).__name__
    if not hasattr(model, "n_features_in_"):
        raise UnsupportedModelError(f"The {name} is not fitted; fit it before loading.")
    d = int(model.n_features_in_)
    common = EnsembleHeader(n_features=d, feature_names=_names(model, d), source=f"sklearn.{name}")

    if isinstance(model, (skt.DecisionTreeClassifier, ske.RandomForestClassifier, ske.ExtraTreesClassifier)):
        return _parse_forest_classifier(model, common)

    if isinstance(model, (skt.DecisionTreeRegressor, ske.RandomForestRegressor, ske.ExtraTreesRegressor)):
        return _parse_forest_regressor(model, common)

    if isinstance(model, (ske.GradientBoostingClassifier, ske.GradientBoostingRegressor)):
        return _parse_gb(model, common)

    if isinstance(model, (ske.HistGradientBoostingClassifier, ske.HistGradientBoostingRegressor)):
        return parse_hgb(model, common)

    if isinstance(model, ske.IsolationForest):
        return _parse_iforest(model, common)

    raise describe_unsupported(model)


def _tree_estimators(model: ModelLike) -> list[Any]:
    """A single tree as a forest of one, else the forest's trees."""
    from sklearn import tree as skt  # scikit-learn, as in parse_sklearn

    single = isinstance(model, (skt.DecisionTreeClassifier, skt.DecisionTreeRegressor))
    return [model] if single else list(model.estimators_)


def _parse_forest_classifier(model: ModelLike, common: EnsembleHeader) -> TreeEnsemble:
    """A decision tree, random forest or extra-trees classifier: the mean of its trees' class fractions."""
    _check_single_output(model)
    ests = _tree_estimators(model)
    k = len(model.classes_)
    nan = _takes_nan(model)
    return TreeEnsemble(tuple(_tree(e, _class_values(e), nan=nan) for e in ests), task="classification",
                        aggregation="mean", link="identity", base_score=np.zeros(k),
                        classes=np.asarray(model.classes_), **common)


def _parse_forest_regressor(model: ModelLike, common: EnsembleHeader) -> TreeEnsemble:
    """A decision tree, random forest or extra-trees regressor: the mean of its trees' values."""
    _check_single_output(model)
    ests = _tree_estimators(model)
    nan = _takes_nan(model)
    return TreeEnsemble(tuple(_tree(e, e.tree_.value[:, 0, :], nan=nan) for e in ests), task="regression",
                        aggregation="mean", link="identity", base_score=np.zeros(1), **common)


def _parse_gb(model: ModelLike, common: EnsembleHeader) -> TreeEnsemble:
    from sklearn.dummy import DummyClassifier, DummyRegressor  # scikit-learn, as in parse_sklearn

    init = model.init_
    if not (isinstance(init, str) and init == "zero") and not isinstance(init, (DummyClassifier, DummyRegressor)):
        raise UnsupportedModelError(
            f"GradientBoosting with init={type(init).__name__} has an input-dependent baseline; "
            "only the default (prior) or 'zero' init is supported."
        )
    try:
        base = np.asarray(model._raw_predict_init(np.zeros((1, model.n_features_in_))), dtype=np.float64)[0]
    except Exception as exc:  # noqa: BLE001 - scikit-learn's own baseline fails on a damaged init_
        raise ModelError(f"scikit-learn cannot compute this {type(model).__name__}'s baseline (its init_: "
                         f"{type(exc).__name__}); the model is damaged. Re-fit it and save it again.") from None
    lr = float(model.learning_rate)
    stages, K = model.estimators_.shape
    trees = []
    for s in range(stages):
        for k in range(K):
            e = model.estimators_[s, k]
            v = np.zeros((e.tree_.node_count, K))
            v[:, k] = lr * e.tree_.value[:, 0, 0]
            trees.append(_tree(e, v))
    if hasattr(model, "classes_"):
        loss = getattr(model, "loss", "log_loss")
        link: Link = "sigmoid" if K == 1 else "softmax"
        return TreeEnsemble(tuple(trees), task="classification", aggregation="sum", link=link,
                            base_score=base, classes=np.asarray(model.classes_),
                            sigmoid_scale=2.0 if loss == "exponential" else 1.0,
                            positive_at_tie=True, **common)
    return TreeEnsemble(tuple(trees), task="regression", aggregation="sum", link="identity",
                        base_score=base, **common)


def _parse_iforest(model: ModelLike, common: EnsembleHeader) -> TreeEnsemble:
    from sklearn.ensemble._iforest import _average_path_length  # scikit-learn, as in parse_sklearn

    trees = []
    nan = _takes_nan(model)
    for e, feats, dpl, apl in zip(model.estimators_, model.estimators_features_,
                                  model._decision_path_lengths, model._average_path_length_per_tree):
        depth = np.asarray(dpl, dtype=np.float64) + np.asarray(apl, dtype=np.float64) - 1.0
        trees.append(_tree(e, depth[:, None], features=np.asarray(feats), nan=nan))
    c = float(_average_path_length([model._max_samples])[0])
    return TreeEnsemble(tuple(trees), task="anomaly", aggregation="mean", link="isolation",
                        base_score=np.zeros(1), meta={"c": c, "offset": float(model.offset_)}, **common)
