"""FCCA's compressed tree: a depth-limited tree on the binary columns of a discretisation.

:class:`TreeFit` holds the tree flat, predicts, scores itself on held-out rows
and draws itself as text or Graphviz. :func:`fit_binary_tree` grows it with
CART (scikit-learn) or GOSDT (Lin et al. 2020, the paper's optimal sparse tree,
regularisation ``10 / n_train`` as in section 4.1) when the ``gosdt`` package
is installed. Used by :meth:`core.compression.result.FCCAResult.fit_tree`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier

from core.dot import label as dot_label

__all__ = ["TreeFit", "fit_binary_tree", "gosdt_available", "same_labels"]


def gosdt_available() -> bool:
    try:
        import gosdt  # noqa: F401 - optional package: only probed here
    except Exception:  # noqa: BLE001 - any import failure means "not usable"
        return False
    return True


def same_labels(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality of two label arrays (as text when their types do not compare)."""
    a, b = np.asarray(a), np.asarray(b)
    try:
        return a.astype(b.dtype) == b
    except (TypeError, ValueError):
        return a.astype(str) == b.astype(str)


@dataclass(frozen=True)
class TreeFit:
    """A depth-limited tree on the binary columns of a discretisation.

    Nodes are stored flat: ``feature[k]`` is the binary column tested at node
    ``k`` (-1 at a leaf); rows with value 1 (``x > t``) go to ``right[k]``,
    the others to ``left[k]``; ``label[k]`` is the class predicted at a leaf
    and ``n[k]`` the number of training rows reaching node ``k``.
    """

    method: str
    columns: list[str]
    feature: np.ndarray
    left: np.ndarray
    right: np.ndarray
    label: np.ndarray
    n: np.ndarray
    Q: float
    accuracy: float = float("nan")       # held-out agreement with the labels
    fidelity: float = float("nan")       # held-out agreement with the model
    train_accuracy: float = float("nan")
    n_train: int = 0
    n_test: int = 0
    fit_time: float = 0.0
    note: str = ""

    @property
    def depth(self) -> int:
        def d(k: int) -> int:
            return 0 if self.feature[k] < 0 else 1 + max(d(self.left[k]), d(self.right[k]))
        return d(0)

    @property
    def n_leaves(self) -> int:
        return int(np.sum(self.feature < 0))

    def predict(self, B: np.ndarray | pd.DataFrame) -> np.ndarray:
        """Labels for binary rows (columns as ``columns``)."""
        B = np.asarray(B[self.columns] if isinstance(B, pd.DataFrame) else B)
        node = np.zeros(len(B), dtype=int)
        for _ in range(len(self.feature)):
            inner = self.feature[node] >= 0
            if not inner.any():
                break
            idx = np.flatnonzero(inner)
            go_right = B[idx, self.feature[node[idx]]] > 0
            node[idx] = np.where(go_right, self.right[node[idx]], self.left[node[idx]])
        return self.label[node]

    def scored(self, B: np.ndarray, y: np.ndarray, pred: np.ndarray) -> TreeFit:
        """This tree with its held-out scores on binary rows ``B``: ``accuracy``
        against the labels ``y``, ``fidelity`` against the model's labels ``pred``
        (either may be empty)."""
        scores: dict[str, Any] = {"n_test": len(B)}
        if len(B):
            out = self.predict(B)
            if len(y):
                scores["accuracy"] = float(np.mean(same_labels(out, y)))
            if len(pred):
                scores["fidelity"] = float(np.mean(same_labels(out, pred)))
        return replace(self, **scores)

    def to_text(self) -> str:
        lines: list[str] = []

        def walk(k: int, indent: str) -> None:
            if self.feature[k] < 0:
                lines.append(f"{indent}predict {self.label[k]}  ({self.n[k]} rows)")
                return
            col = self.columns[self.feature[k]]
            lines.append(f"{indent}if {col}:")
            walk(self.right[k], indent + "    ")
            lines.append(f"{indent}else:  # not {col}")
            walk(self.left[k], indent + "    ")
        walk(0, "")
        return "\n".join(lines)

    def to_graphviz(self) -> str:
        out = ["digraph fcca_tree {", 'node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
               'edge [fontname="Helvetica", fontsize=10];']
        for k in range(len(self.feature)):
            if self.feature[k] < 0:
                out.append(f'n{k} [label="{dot_label(self.label[k])}\\n{self.n[k]} rows", fillcolor="#e8f1fb"];')
            else:
                col = dot_label(self.columns[self.feature[k]])
                out.append(f'n{k} [label="{col} ?\\n{self.n[k]} rows", fillcolor="#f6f6f6"];')
                out.append(f'n{k} -> n{self.right[k]} [label="yes"];')
                out.append(f'n{k} -> n{self.left[k]} [label="no"];')
        out.append("}")
        return "\n".join(out)


def _tree_from_sklearn(clf: Any, columns: list[str], method: str, Q: float) -> TreeFit:
    t = clf.tree_
    leaf = t.children_left < 0
    feature = np.where(leaf, -1, t.feature).astype(int)
    # binary columns split at 0.5: the left child holds 0 (x <= t), the right 1 (x > t)
    label = clf.classes_[np.argmax(t.value[:, 0, :], axis=1)]
    return TreeFit(method, columns, feature, t.children_left.astype(int), t.children_right.astype(int), label,
                   t.n_node_samples.astype(int), Q)


def _tree_from_gosdt(root: Any, classes: np.ndarray, columns: list[str], B: np.ndarray, Q: float) -> TreeFit:
    feature: list[int] = []
    left: list[int] = []
    right: list[int] = []
    label: list[Any] = []
    n: list[int] = []

    def add(node: Any, rows: np.ndarray) -> int:
        k = len(feature)
        feature.append(-1)
        left.append(-1)
        right.append(-1)
        label.append(None)
        n.append(int(rows.sum()))
        if hasattr(node, "prediction"):
            label[k] = classes[node.prediction]
            return k
        j = int(node.feature)
        feature[k] = j
        ones = B[:, j] > 0
        # GOSDT sends rows whose column is true to its left child
        right[k] = add(node.left_child, rows & ones)
        left[k] = add(node.right_child, rows & ~ones)
        return k

    add(root, np.ones(len(B), dtype=bool))
    return TreeFit("gosdt", columns, np.array(feature), np.array(left), np.array(right), np.array(label, dtype=object),
                   np.array(n), Q)


def fit_binary_tree(B: np.ndarray, y: np.ndarray, columns: list[str], Q: float, *, method: str = "cart",
                    max_depth: int = 3, random_state: int = 0, time_limit: float = 60.0) -> TreeFit:
    """A tree of depth <= ``max_depth`` on binary rows ``B`` (columns named
    ``columns``, kept at level ``Q``) with labels ``y``, scored on those rows.
    ``method``: "cart", "gosdt" (falls back to CART with a note when the package
    is missing) or "auto" (GOSDT if installed)."""
    notes: list[str] = []
    use = "cart" if method == "cart" or not gosdt_available() else "gosdt"
    if method == "gosdt" and use == "cart":
        notes.append("GOSDT is not installed (pip install gosdt); CART was used instead.")
    t0 = time.perf_counter()
    if B.shape[1] == 0 or np.unique(y.astype(str)).size < 2:
        values, counts = np.unique(y, return_counts=True)
        tree = TreeFit(use, columns, np.array([-1]), np.array([-1]), np.array([-1]),
                       np.array([values[np.argmax(counts)]], dtype=object), np.array([len(y)]), Q)
        notes.append("Nothing to split on at this Q: the tree is a single leaf.")
    elif use == "gosdt":
        tree, extra = _fit_gosdt(B, y, columns, max_depth, Q, time_limit)
        notes.append(extra)
    else:
        clf = DecisionTreeClassifier(max_depth=max_depth, random_state=random_state).fit(B, y)
        tree = _tree_from_sklearn(clf, columns, "cart", Q)
    return replace(tree, fit_time=time.perf_counter() - t0, note=" ".join(n for n in notes if n), n_train=len(B),
                   train_accuracy=float(np.mean(same_labels(tree.predict(B), y))))


def _fit_gosdt(B: np.ndarray, y: np.ndarray, columns: list[str], max_depth: int, Q: float,
               time_limit: float) -> tuple[TreeFit, str]:
    from gosdt import GOSDTClassifier  # optional package: imported only when installed (gosdt_available)

    classes, yi = np.unique(pd.Series(y).astype(str).to_numpy(), return_inverse=True)
    originals = np.array([y[np.flatnonzero(yi == k)[0]] for k in range(len(classes))], dtype=object)
    # gosdt >= 1.0 counts a lone root as depth 0, as max_depth does (0.x counted it as 1: a budget
    # of max_depth + 1 then grew one level more than asked)
    clf = GOSDTClassifier(regularization=max(10.0 / len(B), 1e-4), allow_small_reg=True,
                          depth_budget=max_depth, time_limit=max(1, int(time_limit)), worker_limit=1)
    clf.fit(pd.DataFrame(B, columns=[f"c{k}" for k in range(B.shape[1])]), yi)
    tree = _tree_from_gosdt(clf.trees_[0].tree, originals, columns, B, Q)
    status = str(getattr(getattr(clf, "result_", None), "status", ""))
    extra = "" if "CONVERGED" in status or not status else f"GOSDT stopped with status {status.split('.')[-1]}."
    return tree, extra
