"""Standard group fairness of the model's decisions, beside the recourse audit.

Computed with fairlearn's ``MetricFrame`` and metric functions (the
convention auditors expect), over every row of the data, for each protected
attribute and each intersection of two or three of them (``sex × race``):

* classifiers, the favourable outcome being the audit's target class (a
  one-vs-rest view for more than two classes): per group the selection rate,
  TPR, FPR, FNR, precision and accuracy (TPR and the rest need the labels);
  then per attribute the demographic-parity and equalised-odds differences
  and ratios (fairlearn's ``demographic_parity_difference`` / ``_ratio`` and
  ``equalized_odds_difference`` / ``_ratio``, "between groups");
* regressors: per group the mean prediction, the share of predictions in the
  target interval and, with labels, the mean absolute error.

Every figure has a seeded bootstrap percentile interval: rows are resampled
``n_boot`` times (within the data as a whole, as fairlearn's ``MetricFrame``
does), the group metrics and the disparities recomputed on each replicate from
the same definitions (a test checks them against fairlearn's functions).

Memory does not grow with ``n_boot`` times the rows: the replicates' row
indices are drawn a block at a time (:data:`BLOCK`, the same numbers as one
draw of them all: numpy's generator draws them one after another), and each
block is reduced to its counts per group before the next is drawn. On 100,000
rows, 500 replicates took 1.5 GB at once. A classifier's decisions reach
fairlearn as their cells (group, label, decision) with the number of rows in
each as sample weights, which gives the same figures as the rows themselves
(sums of whole numbers are exact): fairlearn reads every row in Python, 2-3 s
for 20,000 rows and each attribute.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd

from core.typing import Label

__all__ = ["GroupFairness", "group_fairness", "CLASSIFIER_METRICS", "DISPARITIES"]

CLASSIFIER_METRICS = ("selection rate", "TPR", "FPR", "FNR", "precision", "accuracy")
REGRESSOR_METRICS = ("mean prediction", "in target", "MAE")
DISPARITIES = ("demographic parity difference", "demographic parity ratio", "equalised odds difference",
               "equalised odds ratio")
SEP = " × "
#: row indices drawn at once by the bootstrap (replicates × rows, 8 MB of them)
BLOCK = 1 << 20


@dataclass(frozen=True)
class GroupFairness:
    """``by_group``: attribute, group, n, each metric with ``_lo``/``_hi``;
    ``disparities``: attribute, measure, value, lo, hi; ``notes``: what was left out."""

    by_group: pd.DataFrame
    disparities: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def _fairlearn_metrics(has_labels: bool) -> dict[str, Any]:
    from fairlearn.metrics import false_negative_rate, false_positive_rate, selection_rate, true_positive_rate
    from sklearn.metrics import accuracy_score, precision_score

    def precision(t: Any, p: Any, sample_weight: Any = None) -> float:
        return float(precision_score(t, p, zero_division=0, sample_weight=sample_weight))

    m: dict[str, Any] = {"selection rate": selection_rate}
    if has_labels:
        m.update({"TPR": true_positive_rate, "FPR": false_positive_rate, "FNR": false_negative_rate,
                  "precision": precision, "accuracy": accuracy_score})
    return m


def _replicates(n: int, n_boot: int, random_state: int) -> Iterator[np.ndarray]:
    """The bootstrap's row indices, ``(n_boot, n)`` drawn from one seeded generator, a block
    of replicates at a time (see the module docstring)."""
    rng = np.random.default_rng(random_state)
    step = max(1, BLOCK // max(n, 1))
    for a in range(0, n_boot, step):
        yield rng.integers(0, n, size=(min(step, n_boot - a), n))


def _cells(codes: np.ndarray, yt: np.ndarray, yp: np.ndarray) -> np.ndarray:
    """Each row's cell: its group's code, then its label and decision (TN, FP, FN, TP)."""
    return codes.astype(np.int64) * 4 + yt.astype(np.int64) * 2 + yp.astype(np.int64)


def _counts(cells: np.ndarray, k: int, idx: np.ndarray) -> np.ndarray:
    """Per replicate (rows of ``idx``) and group (k): n, TP, FP, FN, TN."""
    b = idx.shape[0]
    base = cells[idx]
    base += np.arange(b, dtype=np.int64)[:, None] * (4 * k)      # each replicate's cells apart
    tn, fp, fn, tp = np.moveaxis(np.bincount(base.ravel(), minlength=b * 4 * k).reshape(b, k, 4).astype(float), 2, 0)
    return np.stack([tn + fp + fn + tp, tp, fp, fn, tn], axis=2)


def _metric_frame(metrics: dict[str, Any], g: np.ndarray, yt: np.ndarray, yp: np.ndarray, attr: str) -> pd.DataFrame:
    """fairlearn's ``MetricFrame(...).by_group`` of the rows, computed on their cells
    (group, label, decision) weighted by their numbers of rows: the same figures."""
    from fairlearn.metrics import MetricFrame

    levels, inv = np.unique(g, return_inverse=True)
    count = np.bincount(_cells(inv, yt, yp), minlength=4 * len(levels))
    c = np.flatnonzero(count)
    w = count[c].astype(float)
    mf = MetricFrame(metrics=metrics, y_true=(c % 4) // 2, y_pred=c % 2,
                     sensitive_features=pd.Series(levels[c // 4], name=attr),
                     sample_params={m: {"sample_weight": w} for m in metrics})
    return mf.by_group


def _rates(c: np.ndarray, has_labels: bool) -> dict[str, np.ndarray]:
    n, tp, fp, fn, tn = (c[..., i] for i in range(5))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = {"selection rate": (tp + fp) / n}
        if has_labels:
            r.update({"TPR": tp / (tp + fn), "FPR": fp / (fp + tn), "FNR": fn / (tp + fn),
                      "precision": np.where(tp + fp > 0, tp / (tp + fp), 0.0), "accuracy": (tp + tn) / n})
    return r


def _disparities(r: dict[str, np.ndarray], has_labels: bool) -> dict[str, np.ndarray]:
    """fairlearn's "between groups" definitions on per-group rates (last axis: groups)."""
    def diff(v: np.ndarray) -> np.ndarray:
        return np.asarray(np.nanmax(v, axis=-1) - np.nanmin(v, axis=-1))

    def ratio(v: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            hi = np.nanmax(v, axis=-1)
            return np.where(hi > 0, np.nanmin(v, axis=-1) / hi, np.nan)

    out = {"demographic parity difference": diff(r["selection rate"]),
           "demographic parity ratio": ratio(r["selection rate"])}
    if has_labels:
        out["equalised odds difference"] = np.maximum(diff(r["TPR"]), diff(r["FPR"]))
        out["equalised odds ratio"] = np.minimum(ratio(r["TPR"]), ratio(r["FPR"]))
    return out


def _interval(samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    q = (1 - level) / 2
    with np.errstate(invalid="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanquantile(samples, q, axis=0), np.nanquantile(samples, 1 - q, axis=0)


def _attribute_sets(labels: Mapping[str, np.ndarray], max_order: int) -> dict[str, np.ndarray]:
    names = list(labels)
    out = {a: np.asarray(labels[a]).astype(str) for a in names}
    for order in range(2, min(max_order, len(names)) + 1):
        for combo in combinations(names, order):
            out[SEP.join(combo)] = np.array([SEP.join(v) for v in zip(*(out[a] for a in combo))])
    return out


def group_fairness(labels: Mapping[str, np.ndarray], y_pred: np.ndarray, *, favourable: Label | None = None,
                   y_true: np.ndarray | None = None, target_interval: tuple[float, float] | None = None,
                   n_boot: int = 300, max_order: int = 3, min_group: int = 1,
                   random_state: int = 0) -> GroupFairness:
    """Group metrics and disparities (see the module docstring).

    labels : attribute -> a group label per row (``core.audit.group_labels``).
    y_pred : the model's decisions (classes) or predictions (regression).
    favourable : the favourable class (classifiers); target_interval : (lo, hi) (regressors).
    y_true : the labels, or None (then only the selection rate and demographic parity).
    max_order : the largest intersection (2: pairs, 3: triples).
    min_group : groups with fewer rows are left out of the disparities (kept in the table).
    """
    y_pred = np.asarray(y_pred)
    n = len(y_pred)
    sets = _attribute_sets(labels, max_order)
    notes: list[str] = []
    if target_interval is not None:
        return _regression(sets, y_pred, y_true, target_interval, _replicates(n, n_boot, random_state), notes)
    has_labels = y_true is not None
    if not has_labels:
        notes.append("The data has no labels: only selection rates and demographic parity are reported.")
    yt, yp = _favourable(y_pred, y_true, favourable)
    frames, cells = _classifier_frames(sets, _fairlearn_metrics(has_labels), yt, yp)
    parts: dict[str, list[np.ndarray]] = {attr: [] for attr in sets}
    for idx in _replicates(n, n_boot, random_state):        # every attribute's counts of a block, then the next
        for attr in sets:
            parts[attr].append(_counts(cells[attr], len(frames[attr]), idx))
    rows, disp_rows = [], []
    for attr in sets:
        by = frames[attr]
        levels = [str(v) for v in by.index]
        size = np.bincount(cells[attr] // 4, minlength=len(levels))
        counted = np.concatenate(parts.pop(attr)) if n_boot else np.zeros((0, len(levels), 5))
        boot = _rates(counted, has_labels)
        rows += _group_rows(attr, levels, size, by, boot)
        keep = size >= min_group
        if keep.sum() < 2:
            notes.append(f"{attr}: fewer than two groups of at least {min_group} rows; no disparity computed.")
            continue
        disp_rows += _disparity_rows(attr, by, boot, keep, has_labels)
    return GroupFairness(pd.DataFrame(rows), pd.DataFrame(disp_rows), notes)


def _favourable(y_pred: np.ndarray, y_true: np.ndarray | None,
                favourable: Label | None) -> tuple[np.ndarray, np.ndarray]:
    """Whether each row's label (all False without labels) and decision is the favourable class."""
    yp = np.asarray(y_pred == favourable)
    yt = np.asarray(np.asarray(y_true) == favourable) if y_true is not None else np.zeros(len(y_pred), dtype=bool)
    return yt, yp


def _classifier_frames(sets: dict[str, np.ndarray], metrics: dict[str, Any], yt: np.ndarray,
                       yp: np.ndarray) -> tuple[dict[str, pd.DataFrame], dict[str, np.ndarray]]:
    """Per attribute, fairlearn's metrics by group, and each row's cell (group, label, decision)."""
    frames, cells = {}, {}
    for attr, g in sets.items():
        frames[attr] = by = _metric_frame(metrics, g, yt, yp, attr)
        codes = pd.Categorical(g, categories=[str(v) for v in by.index]).codes
        cells[attr] = _cells(codes, yt, yp)
    return frames, cells


def _disparity_rows(attr: str, by: pd.DataFrame, boot: dict[str, np.ndarray], keep: np.ndarray,
                    has_labels: bool) -> list[dict[str, Any]]:
    """The disparities between the groups ``keep`` of one attribute, each with its bootstrap interval."""
    point = _disparities({m: by[m].to_numpy(dtype=float)[keep] for m in by.columns}, has_labels)
    samples = _disparities({m: v[:, keep] for m, v in boot.items()}, has_labels)
    out = []
    for measure, value in point.items():
        lo, hi = _interval(samples[measure][:, None])
        out.append({"attribute": attr, "measure": measure, "value": float(value),
                    "lo": float(lo[0]), "hi": float(hi[0]), "groups": int(keep.sum())})
    return out


def _group_rows(attr: str, levels: list[str], size: np.ndarray, by: pd.DataFrame, boot: dict) -> list[dict]:
    """One row per group: its size, and each metric with its bootstrap interval."""
    rows = []
    for i, level in enumerate(levels):
        row: dict[str, Any] = {"attribute": attr, "group": level, "n": int(size[i])}
        for m in by.columns:
            lo, hi = _interval(boot[m][:, i:i + 1])
            row[m], row[f"{m}_lo"], row[f"{m}_hi"] = float(by.iloc[i][m]), float(lo[0]), float(hi[0])
        rows.append(row)
    return rows


def _block_means(codes: np.ndarray, by: pd.DataFrame, per: dict[str, np.ndarray],
                 idx: np.ndarray) -> dict[str, np.ndarray]:
    """Per replicate of a block (rows of ``idx``) and group (``codes``), the mean of each
    metric of ``by`` over the per-row values ``per``."""
    k = len(by)
    base = codes[idx].astype(np.int64)
    base += np.arange(idx.shape[0], dtype=np.int64)[:, None] * k
    base = base.ravel()
    c = np.bincount(base, minlength=idx.shape[0] * k).reshape(-1, k)
    out = {}
    for m in by.columns:
        s = np.bincount(base, weights=per[m][idx].ravel(), minlength=idx.shape[0] * k).reshape(-1, k)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[m] = s / c
    return out


def _regression(sets: dict[str, np.ndarray], y_pred: np.ndarray, y_true: np.ndarray | None,
                interval: tuple[float, float], blocks: Iterator[np.ndarray], notes: list[str]) -> GroupFairness:
    from sklearn.metrics import mean_absolute_error

    lo_t, hi_t = interval
    inside = ((y_pred >= lo_t) & (y_pred <= hi_t)).astype(float)
    metrics: dict[str, Any] = {"mean prediction": lambda t, p: float(np.mean(p)),
                               "in target": lambda t, p: float(np.mean((p >= lo_t) & (p <= hi_t)))}
    has_labels = y_true is not None
    if has_labels:
        metrics["MAE"] = mean_absolute_error
    else:
        notes.append("The data has no labels: no prediction error is reported.")
    yt = np.asarray(y_true, dtype=float) if has_labels else np.zeros(len(y_pred))
    per = {"mean prediction": np.asarray(y_pred, dtype=float), "in target": inside, "MAE": np.abs(yt - y_pred)}
    frames, codes = _regressor_frames(sets, metrics, yt, y_pred)
    parts: dict[tuple[str, str], list[np.ndarray]] = {(a, m): [] for a in sets for m in frames[a].columns}
    for idx in blocks:                           # each block's sums per group, then the next block
        for attr in sets:
            for m, mean in _block_means(codes[attr], frames[attr], per, idx).items():
                parts[(attr, m)].append(mean)
    rows, disp = [], []
    for attr in sets:
        told, disparity = _regressor_rows(attr, frames[attr], codes[attr], parts)
        rows += told
        disp.append(disparity)
    return GroupFairness(pd.DataFrame(rows), pd.DataFrame(disp), notes)


def _regressor_frames(sets: dict[str, np.ndarray], metrics: dict[str, Any], yt: np.ndarray,
                      y_pred: np.ndarray) -> tuple[dict[str, pd.DataFrame], dict[str, np.ndarray]]:
    """Per attribute, fairlearn's metrics of the predictions by group, and each row's group code."""
    from fairlearn.metrics import MetricFrame

    frames, codes = {}, {}
    for attr, g in sets.items():
        mf = MetricFrame(metrics=metrics, y_true=yt, y_pred=np.asarray(y_pred, dtype=float),
                         sensitive_features=pd.Series(g, name=attr))
        frames[attr] = mf.by_group
        codes[attr] = pd.Categorical(g, categories=[str(v) for v in mf.by_group.index]).codes
    return frames, codes


def _regressor_rows(attr: str, by: pd.DataFrame, codes: np.ndarray,
                    parts: dict[tuple[str, str], list[np.ndarray]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One attribute's rows of the per-group table (each metric with its bootstrap interval,
    from the replicates' means ``parts``), and its in-target rate difference."""
    levels = [str(v) for v in by.index]
    k = len(levels)
    size = np.bincount(codes, minlength=k)
    boot = {m: np.concatenate(parts[(attr, m)]) if parts[(attr, m)] else np.zeros((0, k)) for m in by.columns}
    v = by["in target"].to_numpy(dtype=float)
    lo, hi = _interval((np.nanmax(boot["in target"], axis=1) - np.nanmin(boot["in target"], axis=1))[:, None])
    return _group_rows(attr, levels, size, by, boot), {
        "attribute": attr, "measure": "in-target rate difference", "value": float(v.max() - v.min()),
        "lo": float(lo[0]), "hi": float(hi[0]), "groups": k}
