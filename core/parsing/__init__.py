"""One parser per source library, one dispatcher.

``parse(model)`` finds the parser for the model's library by its module name
(so xgboost/lightgbm are imported only when such a model arrives) and raises
``UnsupportedModelError`` listing what is supported otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from core.errors import UnsupportedModelError

__all__ = ["parse", "verify_against_source", "build_tree"]


def _parser_for(model: Any) -> Callable[[Any], Any]:
    module = type(model).__module__.split(".")[0]
    if module == "sklearn":
        if type(model).__name__ == "Pipeline":
            from core.parsing.pipeline import parse_pipeline
            return parse_pipeline
        from core.parsing.sklearn import parse_sklearn
        return parse_sklearn
    if module == "xgboost":
        from core.parsing.xgboost import parse_xgboost
        return parse_xgboost
    if module == "lightgbm":
        from core.parsing.lightgbm import parse_lightgbm
        return parse_lightgbm
    if type(model).__name__ == "CatBoostJSON" or module == "catboost":
        from core.parsing.catboost import parse_catboost
        return parse_catboost
    from core.ensemble import describe_unsupported
    raise describe_unsupported(model)


def parse(model: Any):
    """Convert a fitted model into a ``TreeEnsemble`` (no verification)."""
    return _parser_for(model)(model)


def build_tree(nodes: list[dict[str, Any]], n_outputs: int, n_codes: int | None = None):
    """Build a ``Tree`` from nodes given as dicts, re-indexed in preorder.

    Each node dict has either ``feature``, ``threshold`` (already in the
    ``x <= t`` convention), ``left`` and ``right`` (indices into ``nodes``),
    or ``value`` (a float or a sequence of length ``n_outputs``). A categorical
    split has ``categories_left`` (the codes that go left) instead of
    ``threshold``; ``n_codes`` (the largest number of codes, missing code
    included, of any categorical feature) sizes the bitsets. Preorder
    numbering guarantees that children come after their parent, and drops
    nodes the root does not reach (pruned or deleted nodes).
    """
    from core.ensemble import Tree

    from core.errors import ModelError

    order: list[int] = []
    seen: set[int] = set()
    stack = [0]
    while stack:
        i = stack.pop()
        if not isinstance(i, (int, np.integer)) or not 0 <= i < len(nodes):
            raise ModelError(f"A tree of the model points to node {i!r}, which does not exist (the tree has "
                             f"{len(nodes)} nodes): the file is damaged. Re-save the model from its library.")
        if i in seen:   # a child pointing back to an ancestor (or two parents): would loop forever
            raise ModelError(f"A tree of the model reaches node {i} twice (a cycle or a shared child): the file "
                             "is damaged. Re-save the model from its library.")
        seen.add(i)
        order.append(i)
        nd = nodes[i]
        if "left" in nd:
            stack.append(nd["right"])
            stack.append(nd["left"])
    new_id = {old: k for k, old in enumerate(order)}
    n = len(order)
    cl = np.full(n, -1, dtype=np.int32)
    cr = np.full(n, -1, dtype=np.int32)
    ft = np.full(n, -1, dtype=np.int32)
    th = np.full(n, np.nan)
    val = np.zeros((n, n_outputs))
    left_sets: list = [None] * n
    for k, old in enumerate(order):
        nd = nodes[old]
        if "left" in nd:
            cl[k], cr[k] = new_id[nd["left"]], new_id[nd["right"]]
            ft[k] = nd["feature"]
            if "categories_left" in nd:          # categorical split: these codes go left
                left_sets[k] = nd["categories_left"]
            else:
                th[k] = nd["threshold"]
        else:
            val[k] = nd["value"]
    if not any(c is not None for c in left_sets):
        return Tree(cl, cr, ft, th, val)
    from core.ensemble import category_bits_from_sets

    n_codes = int(n_codes or 1 + max(max(c, default=0) for c in left_sets if c is not None))
    return Tree(cl, cr, ft, th, val, category_bits_from_sets(left_sets, n_codes))


def verify_against_source(ens: Any, model: Any, n_random: int = 64, seed: int = 0) -> None:
    """Compare the ensemble's predictions with the source model's.

    Points: random points spanning the split levels and points placed exactly
    on thresholds. Raises ``UnsupportedModelError`` when they disagree, so a
    model whose semantics we do not reproduce is refused, never approximated.
    """
    from core.parsing.native import native_outputs

    X = probe_points(ens, n_random, seed)
    ours, theirs, what = native_outputs(ens, model, X)
    if theirs is None:
        return
    err = float(np.max(np.abs(ours - theirs))) if ours.size else 0.0
    scale = max(1.0, float(np.max(np.abs(theirs))) if theirs.size else 1.0)
    # XGBoost accumulates margins in float32: allow its rounding, nothing more
    tol = (2e-5 if ens.source.startswith("xgboost") else 1e-6) * scale
    if not np.isfinite(err) or err > tol:
        raise UnsupportedModelError(
            f"This {ens.source} model was parsed but its {what} differ from the library's own "
            f"(max difference {err:.3g}); it uses a feature the parser does not reproduce "
            "(for example categorical splits, missing-value routing or a custom link). "
            "Please report it, or retrain the model without that feature."
        )


def probe_points(ens: Any, n_random: int = 64, seed: int = 0) -> np.ndarray:
    """Random points over the split range plus points exactly on thresholds;
    a categorical feature gets codes, each code (the missing one included) in turn."""
    rng = np.random.default_rng(seed)
    d = ens.n_features
    lo, hi = np.full(d, -1.0), np.full(d, 1.0)
    levels = []
    for j in range(d):
        lv = ens.split_levels(j)
        levels.append(lv)
        if lv.size:
            span = max(lv[-1] - lv[0], 1e-9)
            lo[j], hi[j] = lv[0] - 0.1 * span, lv[-1] + 0.1 * span
    X = rng.uniform(lo, hi, size=(n_random, d))
    on = X.copy()
    for j in range(d):
        if ens.categories[j] is not None:  # every code, the missing one included (if the model takes it)
            k = ens.n_codes(j) - (ens.feature_names[j] in ens.meta.get("no_missing", ()))
            X[:, j] = rng.integers(0, k, size=n_random)
            on[:, j] = np.arange(n_random) % k
        elif levels[j].size:
            on[:, j] = rng.choice(levels[j], size=n_random)
    return np.vstack([X, on])
