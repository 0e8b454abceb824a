"""A table and a model made into one checked workspace (no Streamlit here).

:func:`build_workspace` is the one place where an analyst's table and a model
become what every analysis reads; the app's pages and the audit CLI both call
it, and any failure is a ``ValueError`` subclass whose message the app shows
as is (so it can keep the previous workspace).

Three views of the same rows
----------------------------
*raw*
    the analyst's table as loaded (strings for categories, raw units);
*codes* (``Workspace.X``)
    the numeric view the analyses use: one float column per model feature,
    in the model's order; a categorical feature (``TreeEnsemble.categories``)
    holds its category code ``0..K-1``, ``K`` for a missing or unseen value;
*model input* (:meth:`Workspace.to_raw`)
    the raw columns the model itself takes, built from codes
    (:func:`core.model.native.model_input`): the original model's
    ``predict`` on ``to_raw(X)`` gives the ensemble's answer on ``X``.

How columns are matched: :mod:`core.intake.matching` (no silent misreads: by name,
by position only when confirmed, ignored columns listed, unseen categories
counted, missing values blamed on the data).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, Self, Sequence

import numpy as np
import pandas as pd

from core.errors import DataError, PositionalMatchRequired, SchemaError, UnsupportedModelError
from core.intake.columns import MISSING, NONE, Column, analyst_columns
from core.intake.matching import (
    GENERIC_NAME,
    Source,
    categorical_codes,
    category_key,
    encode,
    match_columns,
    match_hashed_categories,
    match_open_codes,
    norm_text,
    table_names,
    truncate_lightgbm_codes,
)
from core.intake.models import from_model, model_from
from core.intake.parsing.linear import is_linear
from core.model import TreeEnsemble, missing
from core.model.blackbox import BlackBoxModel
from core.model.categorical import OTHER_CODE, decode, expand
from core.model.features import ModelShape, closest_names
from core.model.linear import LinearModel
from core.model.native import model_input
from core.schema import Schema, infer_schema
from core.shown import approx_text, check_class_names, number_text, outcome_text
from core.surrogate import Surrogate, distill
from core.typing import ModelLike, Row, Rows, TargetSpec

if TYPE_CHECKING:
    from core.model.guarantee import ModelKind

__all__ = ["Workspace", "build_workspace", "changes_line", "PositionalMatchRequired", "GENERIC_NAME"]

#: a score this much below the model's own training report is flagged
REPORT_GAP = 0.05


class _Coded(NamedTuple):
    """Rows as category codes per categorical column of the model input (for showing them)."""

    codes: np.ndarray
    names: list[str]
    cats: list[Any]
    own: np.ndarray | None       # the codes of the workspace rows the lines stand for, or None


@dataclass(frozen=True)
class Workspace:
    """A checked table + model + feature settings; see the module docstring.

    Attributes
    ----------
    name : str, shown in the app.
    raw : DataFrame, the table as loaded (the target column included).
    X : DataFrame of shape (n_rows, n_features), the codes view in model order.
    y : Series or None, the target column as in the file (rows aligned with X).
    target : name of the target column, or None.
    model : the original model object, or None (only arrays were kept).
    ensemble : TreeEnsemble.
    schema : Schema of the features.
    mapping : tuple of (model feature, where its values come from).
    ignored : table columns the model does not use.
    notes : what was done to the data, in plain words.
    model_info : facts about the model (origin, scores) for display.
    model_facts : the uploaded model's own size (trees, depth, leaves, features)
        when ``ensemble`` is a rewrite of it (categorical splits as one-hot trees).
    class_names : the analyst's names of a classifier's classes (label as text -> name).
    own_model, model_kind : the model whose answers are the workspace's (a
        :class:`core.model.features.ModelShape`), and its kind (properties): "tree_ensemble"
        (``ensemble`` is the model, exactly); "linear" (``linear`` is it, exactly, over this
        workspace's columns: the optimal counterfactual and the region slices are exact on
        it, and ``ensemble`` is the view of a surrogate of it for the analyses that need
        trees); "black_box" (``model`` is a :class:`core.model.blackbox.BlackBoxModel` run in
        its worker, and ``ensemble`` is the view of its :attr:`surrogate` the analyses read;
        every answer is checked on ``model``).
    surrogate : the :class:`core.surrogate.Surrogate` of a linear or black-box model, else None.
    linear : the :class:`core.model.linear.LinearModel` of a linear model, else None.
    worker : the model's worker when :func:`core.open_workspace` started it (any other model),
        else None: :meth:`close` (or leaving a ``with`` block) stops it. Workspaces made from
        this one (:meth:`with_schema`, :meth:`with_protected`, ...) share it.

    The workspace :func:`core.open_workspace` gives is a
    :class:`core.door.AnalysisWorkspace`, this with every analysis as a method.
    """

    name: str
    raw: pd.DataFrame
    X: pd.DataFrame
    y: pd.Series | None
    target: str | None
    model: Any
    ensemble: TreeEnsemble
    schema: Schema
    data_sha256: str = ""
    model_sha256: str = ""
    notes: tuple[str, ...] = ()
    model_info: dict[str, Any] = field(default_factory=dict)
    mapping: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = ()
    model_facts: dict[str, Any] = field(default_factory=dict)
    class_names: dict[str, str] = field(default_factory=dict)
    surrogate: Surrogate | None = None
    linear: LinearModel | None = None
    worker: Any = field(default=None, repr=False, compare=False)

    # -- the worker's life (a model that runs in a worker the door started)
    def close(self) -> None:
        """Stop the model's worker, if :func:`core.open_workspace` started one, and every process
        it started; the model answers no more (an analysis run after raises
        :class:`~core.errors.WorkerCancelled`). Nothing to release otherwise. Safe to call twice."""
        if self.worker is not None:
            self.worker.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` stopped the model's worker (never for a model read exactly)."""
        return self.worker is not None and self.worker.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the rows and the model
    def outcome_text(self, value: TargetSpec) -> str:
        """A class or prediction as the analyst named it (:func:`core.shown.outcome_text`)."""
        return outcome_text(value, self.class_names if self.ensemble.is_classifier else None)

    def with_class_names(self, names: dict[Any, Any]) -> Self:
        """This workspace with the analyst's names for its classes (e.g. 0 = "refused",
        1 = "approved"), used by every page, the story and the report; nothing else changes."""
        if not self.ensemble.is_classifier:
            raise SchemaError("Class names are for classifiers; this model predicts numbers.")
        classes = self.ensemble.classes
        if classes is None:
            raise SchemaError("This model names no classes, so there are none to rename.")
        try:
            checked = check_class_names(names, list(classes))
        except ValueError as exc:
            raise SchemaError(str(exc)) from None
        return replace(self, class_names=checked)

    @property
    def own_model(self) -> ModelShape:
        """The model whose answers are this workspace's: the linear model (read exactly, over
        these columns), the model in its worker, or the tree ensemble itself; never a surrogate."""
        if self.linear is not None:
            return self.linear
        if isinstance(self.model, ModelShape) and not self.model.exact:
            return self.model
        return self.ensemble

    @property
    def model_kind(self) -> ModelKind:
        """The kind of :attr:`own_model`: "tree_ensemble", "linear" or "black_box"."""
        return self.own_model.kind

    def _own_input(self, X: Rows) -> np.ndarray:
        """Rows of this workspace's view as :attr:`own_model` takes them: a model read exactly
        reads these columns; a model known by its answers, its own codes (categories as codes,
        missing values as missing: :func:`core.model.native.model_input`)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return X if self.own_model.exact else model_input(self.ensemble, X)

    def predict(self, X: Rows) -> np.ndarray:
        """The model's own answers on rows of this workspace's view: the tree ensemble's, the
        linear model's, or a black-box model's from its worker (never its surrogate's)."""
        return self.own_model.predict(self._own_input(X))

    def predict_proba(self, X: Rows) -> np.ndarray | None:
        """The model's own class probabilities on rows of this workspace's view, shape
        (n, n_classes); None when it gives none (a regressor, or a classifier with a decision
        function only)."""
        own = self.own_model
        if not own.is_classifier or not own.has_proba:
            return None
        return own.predict_proba(self._own_input(X))

    @cached_property
    def predictions(self) -> np.ndarray:
        """The model's output on every row, computed once per workspace."""
        return self.predict(self.X.to_numpy(dtype=float))

    @cached_property
    def columns(self) -> list[Column]:
        """The analyst's columns over the model's features (:mod:`core.intake.columns`)."""
        return analyst_columns(self.ensemble, self.schema)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the model's arrays and the rows (codes and target): the key
        of every cached result of this workspace, whatever its name or origin."""
        h = hashlib.sha256(self.ensemble.content_hash().encode())
        if self.own_model is not self.ensemble:         # the analyses read a surrogate: the model too
            h.update(self.own_model.content_hash().encode())
        h.update(np.ascontiguousarray(self.X.to_numpy(dtype=float)).tobytes())
        h.update("|".join(map(str, self.X.columns)).encode())
        if self.y is not None:
            h.update(pd.util.hash_pandas_object(self.y, index=False).to_numpy().tobytes())
        return h.hexdigest()

    @cached_property
    def key(self) -> str:
        """The cache key of results on this workspace: its fingerprint and its
        feature settings (which change what the analyses may move)."""
        return hashlib.sha256((self.fingerprint + self.schema.to_json()).encode()).hexdigest()

    @cached_property
    def _missing_masks(self) -> dict[str, np.ndarray]:
        """Per analyst column with missing values, which rows hold one (a number's
        "missing" state, or a category column's missing or unseen value)."""
        X = self.X.to_numpy(dtype=float)
        out = {}
        for c in self.columns:
            if c.missing is not None:
                hit = X[:, c.missing] > 0.5
            elif c.categories is not None and c.one_hot:
                hit = X[:, list(c.features)].max(axis=1) < 0.5
            elif c.categories is not None:
                hit = X[:, c.features[0]] >= len(c.categories)
            else:
                continue
            if hit.any():
                out[c.name] = hit
        return out

    @property
    def missing_counts(self) -> dict[str, int]:
        """Per analyst column with missing values, how many rows hold one."""
        return {name: int(hit.sum()) for name, hit in self._missing_masks.items()}

    @property
    def rows_with_missing(self) -> int:
        """Rows with at least one missing value (see :attr:`missing_counts`)."""
        masks = list(self._missing_masks.values())
        return int(np.logical_or.reduce(masks).sum()) if masks else 0

    def to_raw(self, X: Rows) -> pd.DataFrame:
        """Codes-view rows (n, n_features) as the raw columns the model takes:
        category codes become the model's categories (missing code: None/NaN)."""
        out: pd.DataFrame = model_input(self.ensemble, np.atleast_2d(np.asarray(X, dtype=float)), frame=True)
        return out

    def raw_view(self, X: Rows, rows: Sequence[int | None] | None = None) -> pd.DataFrame:
        """:meth:`to_raw` for showing: a level that stands for many values (XGBoost's
        "any other code", CatBoost's "any other value") reads as its name, not as
        the one value the model is given for it; but where ``rows`` names the
        workspace row a line stands for and the line keeps that row's level, it
        reads as the person's own value from the table."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        out = self.to_raw(X)
        self._show_missing_numbers(out, X)
        self._show_whole_numbers(out)
        coded = self._coded_view(X, rows)
        self._show_many_levels(out, coded, rows)
        self._show_missing_codes(out, coded, rows)
        return out

    def _show_missing_numbers(self, out: pd.DataFrame, X: np.ndarray) -> None:
        """A missing number reads "missing" (the same form with or without a missing row: 56, not 56.0)."""
        ens = self.ensemble
        for j, k in missing.indicator_of(ens).items():
            name = ens.feature_names[j]
            gone = X[:, k] > 0.5
            if name in out.columns:
                out[name] = [MISSING if g else (int(v) if float(v).is_integer() else float(v))
                             for g, v in zip(gone, out[name].to_numpy(dtype=float))]

    def _show_whole_numbers(self, out: pd.DataFrame) -> None:
        """A column of whole numbers reads as whole numbers: 42, not 42.0."""
        for col in self.columns:
            if col.categories is None and col.integral and col.missing is None and col.name in out.columns:
                vals = out[col.name].to_numpy(dtype=float)
                if np.all(np.isfinite(vals) & (vals == np.round(vals)) & (np.abs(vals) < 2.0 ** 53)):
                    out[col.name] = vals.astype(np.int64)

    def _coded_view(self, X: np.ndarray, rows: Sequence[int | None] | None) -> _Coded:
        """The category codes of ``X`` per categorical column of the model input (the native
        columns when categories were expanded), with the codes of the rows ``rows`` names."""
        ens = self.ensemble
        picked = None if rows is None else self.X.to_numpy(dtype=float)[[r if r is not None else 0 for r in rows]]
        if "expanded" in ens.meta:
            info = ens.meta["expanded"]
            own = None if picked is None else decode(ens.meta, picked)
            return _Coded(decode(ens.meta, X), list(info["names"]), list(info["categories"]), own)
        return _Coded(X, list(ens.feature_names), list(ens.categories), picked)

    def _own_value(self, coded: _Coded, rows: Sequence[int | None] | None, i: int, j: int) -> tuple[bool, Any]:
        """(True, the table's value) when line ``i`` stands for a workspace row that keeps
        its own level of column ``j``; else (False, None)."""
        r = rows[i] if rows is not None else None
        name = coded.names[j]
        if r is None or coded.own is None or coded.own[i, j] != coded.codes[i, j] or name not in self.raw.columns:
            return False, None
        return True, self.raw.loc[self.X.index[r], name]

    def _show_many_levels(self, out: pd.DataFrame, coded: _Coded, rows: Sequence[int | None] | None) -> None:
        """A level standing for many values reads as its name, or as the person's own value."""
        many = {OTHER_CODE, self.ensemble.meta.get("other_level", OTHER_CODE)}
        for j, (name, c) in enumerate(zip(coded.names, coded.cats)):
            if not (c and c[-1] in many and name in out.columns):
                continue
            hit = coded.codes[:, j] == len(c) - 1
            if not hit.any():
                continue
            shown = out[name].astype(object).where(~hit, c[-1])
            for i in np.flatnonzero(hit).tolist():
                own, value = self._own_value(coded, rows, i, j)
                if own:
                    shown.iloc[i] = value
            out[name] = shown

    def _show_missing_codes(self, out: pd.DataFrame, coded: _Coded, rows: Sequence[int | None] | None) -> None:
        """The missing code reads "missing", or missing or unseen (when the table's value was not missing)."""
        for j, (name, c) in enumerate(zip(coded.names, coded.cats)):
            if c is None or name not in out.columns:
                continue
            hit = coded.codes[:, j] >= len(c)
            if not hit.any():
                continue
            shown = out[name].astype(object)
            for i in np.flatnonzero(hit).tolist():
                own, value = self._own_value(coded, rows, i, j)
                shown.iloc[i] = MISSING if _is_missing(value if own else 0) else NONE
            out[name] = shown

    def analyst_view(self, X: Rows, rows: Sequence[int | None] | None = None) -> pd.DataFrame:
        """:meth:`raw_view` in the analyst's columns: a one-hot group the model
        reads as 0/1 columns (``employment=student``, ...) is one column holding
        the category (:mod:`core.intake.columns`), where the group's first column was."""
        out = self.raw_view(X, rows)
        for col in self.columns:
            if not col.one_hot:
                continue
            members = [self.ensemble.feature_names[j] for j in col.features]
            if not all(m in out.columns for m in members):
                continue                                  # the model input already has the column itself
            block = out[members].to_numpy(dtype=float) > 0.5
            values = np.where(block.any(axis=1), np.array(col.categories, dtype=object)[block.argmax(axis=1)],
                              NONE)
            at = list(out.columns).index(members[0])
            out = out.drop(columns=members)
            out.insert(min(at, len(out.columns)), col.name, values)
        return out

    def raw_changes(self, x: Row, x_cf: Row, row: int | None = None) -> pd.DataFrame:
        """A row and its counterfactual in the analyst's raw columns (category
        names, raw units; :meth:`raw_view`): one row per column with ``column``,
        ``original``, ``counterfactual`` (as text) and ``changed``. ``row``: the
        workspace row ``x`` stands for, so a category the model folds into "any
        other value" reads as the person's own value."""
        rows = self.analyst_view(np.vstack([np.asarray(x, dtype=float), np.asarray(x_cf, dtype=float)]),
                                 None if row is None else [row, row])
        a, b = rows.iloc[0], rows.iloc[1]
        changed = [not (_same(a[c], b[c])) for c in rows.columns]
        before = [_cell_text(v, short=True) for v in a]
        return pd.DataFrame({"column": [str(c) for c in rows.columns], "original": before,
                             "counterfactual": [_cell_text(v) if ch else t for v, ch, t in zip(b, changed, before)],
                             "changed": changed})

    def describe_raw_changes(self, x: Row, x_cf: Row, sep: str = "; ", row: int | None = None) -> str:
        """The changes of :meth:`raw_changes` as one line, ``column: before → after``
        (a category switch is one change)."""
        return changes_line(self.raw_changes(x, x_cf, row), sep)

    def labels(self, X: Rows) -> pd.DataFrame:
        """Codes-view rows for display: feature names as columns, categorical
        codes as category names, numbers as they are."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        ens = self.ensemble
        out: dict[str, np.ndarray | list[str]] = {}
        for j, name in enumerate(ens.feature_names):
            if ens.categories[j] is None:
                out[name] = X[:, j]
            else:
                out[name] = [ens.category_label(j, c) for c in X[:, j]]
        return pd.DataFrame(out, columns=list(ens.feature_names))

    def value_text(self, j: int, v: float) -> str:
        """One feature value as text: a category's name, or the number in full."""
        if self.ensemble.categories[j] is not None:
            return self.ensemble.category_label(j, v)
        return number_text(v)

    def with_schema(self, schema: Schema) -> Self:
        if schema.names != list(self.X.columns):
            raise SchemaError(
                f"The schema's features {schema.names[:6]}… do not match the data's columns "
                f"{list(self.X.columns)[:6]}…; load a schema saved for this dataset."
            )
        if {i: lv for i, lv in schema.categorical().items()} != _levels_by_index(self.ensemble):
            raise SchemaError("The schema's categorical features or their levels differ from the model's; "
                              "load a schema saved for this model.")
        return replace(self, schema=schema)

    def query_model(self) -> tuple[Any, dict[str, Any]]:
        """What :func:`core.optimal.optimal_counterfactual` (and the batch, the audit, the
        story) solve for this workspace, and the keyword arguments that go with it: the
        tree ensemble with the original model for the re-checks; the linear model itself,
        exactly; or the surrogate's view with the model and its surrogate (checked and
        repaired on the model)."""
        own = self.own_model
        if not own.exact:
            return self.ensemble, {"model": own, "surrogate": self.surrogate}
        return own, {"model": self.model}

    def with_protected(self, names: Sequence[str]) -> Self:
        """The workspace with the analyst's columns ``names`` (a one-hot or categorical
        column by its name, as :attr:`columns` names them) marked protected and held
        fixed, their "is missing" feature with them; the other settings kept."""
        names = [names] if isinstance(names, str) else list(names)
        by_name = {c.name: c for c in self.columns}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            near = closest_names(str(unknown[0]), list(by_name), n=1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise SchemaError(f"{unknown[0]!r} is not a column the model reads.{hint}")
        schema = self.schema
        for j in sorted({j for n in names for j in by_name[n].every_feature}):
            schema = schema.with_updates(schema.names[j], protected=True, actionability="fixed")
        return self.with_schema(schema)

    @property
    def kind_text(self) -> str:
        """What kind of model this is and what its answers guarantee, in a few words."""
        own = self.own_model
        fid = "" if own.exact or self.surrogate is None else f" (agreement {100 * self.surrogate.fidelity:.1f}%)"
        return own.kind_words() + fid

    def summary(self) -> dict[str, Any]:
        if self.own_model is not self.ensemble:         # facts of the model, not of its surrogate's trees
            s = {"family": self.own_model.source, "kind": self.kind_text, **self.model_facts}
            s.update(self.model_info)
            score = self.score_on_data()
            if score is not None:
                s[score[0]] = round(score[1], 4)
            return s
        s = {**self.ensemble.summary(), **self.model_facts}
        s.update(self.model_info)
        score = self.score_on_data()
        if score is not None:
            s[score[0]] = round(score[1], 4)
        return s

    def score_on_data(self) -> tuple[str, float] | None:
        """("accuracy on this data", value) for a classifier, ("R² on this data",
        value) for a regressor, or None without labels."""
        if self.y is None:
            return None
        if self.ensemble.task == "classification":
            pred, y = self.predictions, self.y.to_numpy()
            try:
                acc = float(np.mean(pred.astype(y.dtype) == y))
            except (TypeError, ValueError):
                acc = float(np.mean(pred.astype(str) == y.astype(str)))
            return "accuracy on this data", acc
        if self.ensemble.task == "regression":
            y = self.y.to_numpy(dtype=float)
            ss = float(np.sum((y - y.mean()) ** 2)) or 1.0
            return "R² on this data", 1 - float(np.sum((y - self.predictions) ** 2)) / ss
        return None


def changes_line(table: pd.DataFrame, sep: str = "; ") -> str:
    """The changed rows of a :meth:`Workspace.raw_changes` table as one line."""
    t = table[table["changed"]]
    return sep.join(f"{c}: {a} → {b}" for c, a, b in zip(t["column"], t["original"], t["counterfactual"]))


def _native_facts(native: TreeEnsemble, ens: TreeEnsemble) -> dict[str, Any]:
    """The uploaded model's own size when the analyses read a rewrite of it (its
    categorical splits as one-hot trees): what its library reports, and the rewrite's."""
    if native is ens:
        return {}
    facts = native.summary()
    facts["analysed as"] = (f"an exact one-hot rewrite: {ens.n_features} columns, {ens.n_leaves:,} leaves, "
                            f"depth {ens.max_depth}")
    return facts


def _cell_text(v: Any, short: bool = False) -> str:
    """A raw value as shown: a category's name, a number in full
    (:func:`core.shown.number_text`: a recourse value shown is the value checked)
    or, ``short``, to 6 significant digits (a row's own value, for reading only),
    "(missing or unseen)"."""
    if v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)):
        return "(missing or unseen)"
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        return approx_text(v, 6) if short else number_text(v)
    return str(v)


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or v is pd.NA or v is pd.NaT


def _same(a: Any, b: Any) -> bool:
    missing = [v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)) for v in (a, b)]
    return all(missing) or (not any(missing) and a == b)


def _levels_by_index(ens: TreeEnsemble) -> dict[int, tuple[str, ...]]:
    return {j: tuple(str(v) for v in c) for j, c in enumerate(ens.categories) if c is not None}


def _as_model(model: Any) -> tuple[TreeEnsemble, Any, dict[str, Any]]:
    """(ensemble, original object or None, facts the file carries) from a
    TreeEnsemble, a loaded model file (``.ensemble``, ``.model``, ``.info``) or
    a fitted model object."""
    if isinstance(model, TreeEnsemble):
        return model, None, {}
    if hasattr(model, "ensemble") and isinstance(model.ensemble, TreeEnsemble):
        return model.ensemble, getattr(model, "model", None), dict(getattr(model, "info", None) or {})
    info = {}
    oob = getattr(model, "oob_score_", None)
    if isinstance(oob, (float, np.floating)):
        info["training report"] = {"metric": "out-of-bag score", "value": float(oob)}
    try:
        return from_model(model), model, info
    except UnsupportedModelError as exc:
        if not callable(getattr(model, "predict", None)):
            raise
        raise UnsupportedModelError(f"{exc} build_workspace reads tree ensembles and linear models exactly; any "
                                    "other model (this one) is analysed through core.open_workspace(model, data, "
                                    "target), which runs it in a sandboxed worker of its own and checks every "
                                    "answer on it.") from None


def _report_gap(ws: Workspace, info: dict[str, Any]) -> str | None:
    """A note when the score on the labelled data is far below the model's own report."""
    rep = info.get("training report")
    score = ws.score_on_data()
    if not rep or score is None:
        return None
    value = float(rep["value"])
    if score[1] < value - REPORT_GAP:
        return (f"The model scores {score[1]:.3f} on this data ({score[0].split(' on ')[0]}), far below its own "
                f"{rep['metric']} of {value:.3f} recorded in the file. Check that the columns are matched and "
                "encoded as in training.")
    return None


def _label_mismatch(ws: Workspace) -> str | None:
    """A note when no label of the target column is one of the classifier's classes."""
    if ws.y is None or ws.ensemble.task != "classification" or ws.ensemble.classes is None:
        return None
    values = ws.y.dropna().unique()
    labels = {norm_text(v) for v in values} | {norm_text(int(v)) for v in values if isinstance(v, (bool, np.bool_))}
    classes = [norm_text(c) for c in ws.ensemble.classes]
    if not labels or labels & set(classes):
        return None
    shown = sorted(labels)[:4]
    return (f"No value of the target column {ws.target!r} (e.g. {', '.join(map(repr, shown))}) is one of the model's "
            f"classes ({', '.join(classes[:6])}), so the accuracy shown and every comparison with the labels "
            "(the audit's error rates) mean nothing. Give the labels as the model's classes, or choose the right "
            "target column.")


def _expanded(ens: TreeEnsemble, sources: list[Source]) -> tuple[TreeEnsemble, list[Source]]:
    """The analyses read categorical splits as exact one-hot trees (core.model.categorical):
    the expanded ensemble, and one source per category column."""
    if not ens.categorical_features:
        return ens, sources
    expanded = expand(ens)
    out: list[Source] = []
    for j, src in enumerate(sources):
        levels = ens.categories[j]
        out += [src] if levels is None else [Source(src.column, category_key(c), one_hot=True, category=True)
                                             for c in levels]
    return expanded, out


def _check_missing_categories(native: TreeEnsemble, ens: TreeEnsemble, table: pd.DataFrame,
                              sources: list[Source], codes: np.ndarray, notes: list[str]) -> None:
    """Rows with no category of a categorical feature: refused when the model
    refuses them (an encoder with handle_unknown='error'), else counted and
    the unseen values named in the notes."""
    for j in native.categorical_features:
        cols = ens.meta["expanded"]["columns"][j]
        none = int((codes[:, cols].sum(axis=1) == 0).sum())
        if none and native.feature_names[j] in native.meta.get("no_missing", ()):
            raise DataError(f"{none} rows of column {sources[cols[0]].column!r} are missing or hold categories the "
                            "model never saw, and the model refuses such values (its encoder has "
                            "handle_unknown='error'). Fix those values, or drop those rows, and upload again.")
        if none:
            col = table[sources[cols[0]].column]
            impute = native.meta.get("impute", {})
            categorical_codes(native, j, col.fillna(impute[col.name]) if col.name in impute else col, notes)


def _inferred_schema(ens: TreeEnsemble, X: pd.DataFrame, sources: list[Source], types: dict[str, str],
                     protected: Sequence[str] | None) -> Schema:
    """Feature settings read from the data: one-hot groups from the sources,
    kinds from the file's type row, category names from the model."""
    groups: dict[str, list[str]] = {}
    for f, src in zip(ens.feature_names, sources):
        if src.one_hot:
            groups.setdefault(src.column, []).append(f)
    kinds = {f: types[s.column] for f, s in zip(ens.feature_names, sources)
             if not s.one_hot and types.get(s.column) in ("numerical", "integer", "binary")}
    states = missing.indicator_of(ens)
    kinds.update({ens.feature_names[k]: "binary" for k in states.values()})
    schema = infer_schema(X, kinds=kinds, groups={g: c for g, c in groups.items() if len(c) >= 2},
                          levels={ens.feature_names[j]: c for j, c in enumerate(ens.categories) if c is not None},
                          protected=protected)
    for j, k in states.items():      # missing -> a value (at the indicator's weight), never a value -> missing
        value = schema[j]
        schema = schema.with_updates(ens.feature_names[k], weight=0.0, protected=value.protected,
                                     actionability="fixed" if value.actionability == "fixed" else "decrease")
    return schema


def _missing_states(ens: TreeEnsemble, sources: list[Source], codes: np.ndarray, notes: list[str]
                    ) -> tuple[TreeEnsemble, list[Source], np.ndarray]:
    """Missing numbers as a state (:mod:`core.model.missing`): one "is missing" column per
    numerical feature with a missing value, the value column holding the column's
    median there; the ensemble rewritten to match. ``codes`` hold NaN only where
    the model routes missing values (:func:`core.intake.matching.encode`)."""
    gaps = np.isnan(codes)
    feats = [j for j in range(codes.shape[1]) if gaps[:, j].any()]
    if not feats and not ens.routes_missing:
        return ens, sources, codes
    fill = []
    for j in feats:
        known = codes[~gaps[:, j], j]
        fill.append(float(np.median(known)) if known.size else 0.0)
    ens = missing.expand(ens, feats, fill)
    if not feats:
        return ens, sources, codes
    filled = np.where(gaps, np.asarray([fill[feats.index(j)] if j in feats else 0.0
                                        for j in range(codes.shape[1])])[None, :], codes)
    codes = np.hstack([filled, gaps[:, feats].astype(float)])
    sources = sources + [Source(sources[j].column) for j in feats]
    rows = int(gaps.any(axis=1).sum())
    each = ", ".join(f"{sources[j].column!r} ({int(gaps[:, j].sum())})" for j in feats[:8])
    notes.append(f"{rows} of {len(codes)} rows have a missing number (columns {each}{' …' if len(feats) > 8 else ''}). "
                 "They are kept: the model routes a missing value as it was trained to, and the analyses read "
                 "\"missing\" as one more state of the column. A counterfactual may keep it missing or give it a "
                 "value (costing the move from the column's median, plus the weight of its \"is missing\" feature, 0 "
                 "by default); set that feature to fixed to keep missing values missing.")
    return ens, sources, codes



def build_workspace(df: pd.DataFrame, target: str | None, model: ModelLike, *, name: str,
                    data_sha256: str = "", model_sha256: str = "", drop_missing: bool = False,
                    model_info: dict[str, Any] | None = None, schema: Schema | None = None,
                    confirm_positions: bool = False, protected: Sequence[str] | None = None) -> Workspace:
    """Match a table to a model and check them; see the module docstring.

    Parameters
    ----------
    df : the table as loaded (``core.intake.io.load_table``); ``df.attrs["column_types"]``
        (a type row's kinds) is read if present.
    target : the label column, or None.
    model : a fitted model object, a ``TreeEnsemble``, or a loaded model file
        (``core.intake.io.load_model_file``).
    name : shown in the app.
    drop_missing : drop rows with missing numerical values instead of refusing them.
    schema : feature settings to keep (used when they fit the model's features).
    confirm_positions : the user has seen and accepted the positional mapping.
    protected : protected columns or one-hot groups, held fixed; none by default (no
        column is marked for its name: :func:`core.schema.suggest_protected` only
        proposes, and :meth:`Workspace.with_protected` applies what the analyst confirms).

    Raises
    ------
    PositionalMatchRequired, SchemaError, DataError, UnsupportedModelError

    Examples
    --------
    >>> from core import build_workspace
    >>> from core.intake.demo import build_demo
    >>> df, target, model, _ = build_demo("credit-lightgbm")
    >>> ws = build_workspace(df, target, model, name="demo")
    >>> ws.X.shape[0] == len(df), ws.ensemble.n_features == ws.X.shape[1]
    (True, True)
    """
    if target is not None and target not in df.columns:
        raise DataError(f"Target column {target!r} is not in the table; columns are {list(df.columns)[:12]}.")
    linear, original = _linear_of(model)
    if isinstance(model, BlackBoxModel) or linear is not None:
        return _answered_workspace(df, target, linear or model, original, name=name, data_sha256=data_sha256,
                                   model_sha256=model_sha256, drop_missing=drop_missing, model_info=model_info,
                                   schema=schema, confirm_positions=confirm_positions, protected=protected)
    ens, original, file_info = _as_model(model)
    if ens.task == "anomaly":
        raise UnsupportedModelError(
            "An Isolation Forest is a plausibility model, not a model to audit; load a classifier or regressor "
            "(you can use an Isolation Forest in the analyses).")
    m = _matched(ens, _feature_table(df, target), drop_missing, confirm_positions)
    X = pd.DataFrame(m.codes, columns=list(m.ens.feature_names))
    y = _target_of(df, target, m.kept)
    types = dict(df.attrs.get("column_types", {}))
    notes = m.notes + _reading_notes(df, m, types)
    schema = _schema_for(schema, m, X, types, protected, target)
    info = {**file_info.pop("display", {}), **dict(model_info or {})}
    ws = Workspace(name=name, raw=df, X=X, y=y, target=target, model=original, ensemble=m.ens, schema=schema,
                   data_sha256=data_sha256, model_sha256=model_sha256, notes=tuple(notes), model_info=info,
                   mapping=tuple((f, s.describe()) for f, s in zip(m.ens.feature_names, m.sources)),
                   ignored=tuple(m.ignored), model_facts=_native_facts(m.native, m.ens))
    return _with_warnings(ws, file_info)


def _schema_for(schema: Schema | None, m: _Match, X: pd.DataFrame, types: dict[str, str],
                protected: Sequence[str] | None, target: str | None) -> Schema:
    """The feature settings given, when they fit the model's features, else read from the
    data (:func:`_inferred_schema`); with the target's name."""
    if schema is None or schema.names != list(X.columns):
        schema = _inferred_schema(m.ens, X, m.sources, types, protected)
    return Schema(schema.features, target=target, constraints=schema.constraints)


def _with_warnings(ws: Workspace, file_info: dict[str, Any]) -> Workspace:
    """The workspace with a note when its labels name none of the classes, or its score is
    far below the model's own report."""
    warn = tuple(w for w in (_label_mismatch(ws), _report_gap(ws, file_info)) if w)
    return replace(ws, notes=ws.notes + warn) if warn else ws


class _Match(NamedTuple):
    """A table matched to a tree ensemble: what :func:`build_workspace` builds the workspace from."""

    native: TreeEnsemble          # the model as read (its names the data's when matched by position)
    ens: TreeEnsemble             # the view the analyses read (one-hot categories, missing states)
    sources: list[Source]         # where each feature of ``ens`` comes from
    codes: np.ndarray             # the codes view, rows kept
    kept: np.ndarray              # the table's rows kept
    notes: list[str]              # what was done to the data
    ignored: list[str]            # table columns the model does not use
    positional: bool              # columns matched by position (as confirmed)


def _feature_table(df: pd.DataFrame, target: str | None) -> pd.DataFrame:
    """The table without its target column; refused when nothing else is left."""
    table = df.drop(columns=[target]) if target else df
    if table.shape[1] == 0:
        raise DataError("The table has no feature columns besides the target.")
    return table


def _matched(ens: TreeEnsemble, table: pd.DataFrame, drop_missing: bool, confirm_positions: bool) -> _Match:
    """Match the table's columns to the ensemble's features and encode the rows as the codes view:
    categories the model knows by hash or code folded in, categorical splits expanded, missing
    categories checked and missing numbers made states."""
    sources, ignored, positional = match_columns(ens, table, confirm_positions=confirm_positions)
    if positional:  # keep the data's names for the features
        names = [s.describe() if s.one_hot else s.column for s in sources]
        ens = from_model(ens, feature_names=[n.replace(" = ", "=") for n in names])
    notes_before: list[str] = []
    if not positional and (renamed := table_names(ens, sources)) is not None:  # LightGBM's "mean_radius"
        pairs = [f"{a} for {b!r}" for a, b in zip(ens.feature_names, renamed) if a != b]
        notes_before.append(f"LightGBM saved {len(pairs)} column name(s) with underscores ({', '.join(pairs[:3])}"
                            f"{', …' if len(pairs) > 3 else ''}): they are matched and shown as the table writes them.")
        ens = from_model(ens, feature_names=renamed)
    if ens.meta.get("category_hashes"):             # CatBoost: categories known by their hashes
        ens, table = match_hashed_categories(ens, table, sources, notes_before)
    if ens.meta.get("open_codes"):                  # XGBoost fitted on codes: any other code routes alike
        ens, table = match_open_codes(ens, table, sources, notes_before)
    table = truncate_lightgbm_codes(ens, table, sources, notes_before)
    native = ens
    ens, sources = _expanded(ens, sources)
    codes, kept, notes = encode(ens, table, sources, drop_missing, keep_missing=ens.routes_missing and not drop_missing)
    notes = notes_before + notes
    _check_missing_categories(native, ens, table, sources, codes, notes)
    ens, sources, codes = _missing_states(ens, sources, codes, notes)
    return _Match(native, ens, sources, codes, kept, notes, list(ignored), positional)


def _target_of(df: pd.DataFrame, target: str | None, kept: np.ndarray) -> pd.Series | None:
    """The target column over the rows kept; refused when a row has no value in it."""
    y = df[target][kept].reset_index(drop=True) if target else None
    if y is not None and y.isna().any():
        raise DataError(f"{int(y.isna().sum())} rows have no value in the target column {target!r}; drop them or "
                        "choose another target column.")
    return y


def _reading_notes(df: pd.DataFrame, m: _Match, types: dict[str, str]) -> list[str]:
    """Notes on how the table was read: columns ignored, matched by position, the file's
    own notes, and columns marked categorical that the model splits as numbers."""
    notes: list[str] = []
    if m.ignored:
        notes.append(f"Ignored columns the model does not use: {', '.join(m.ignored[:12])}"
                     f"{' …' if len(m.ignored) > 12 else ''}.")
    if m.positional:
        notes.append("Columns matched to the model's unnamed features by position, as confirmed.")
    notes.extend(df.attrs.get("notes", []))          # how the file was read (e.g. decimals rounded)
    for j, src in enumerate(m.sources):
        if types.get(src.column) == "categorical" and m.ens.categories[j] is None and not src.one_hot:
            notes.append(f"Column {src.column!r} is marked categorical in the file, but the model splits it as a "
                         "number: it is analysed as a number.")
    return notes


#: rows a black-box model's surrogate is distilled from, at most (a seeded sample of the table)
SURROGATE_ROWS = 20_000


def _analysis_view(ws_ensemble: TreeEnsemble) -> Any:
    """The rewrites the workspace made of a native ensemble (categories as one-hot columns,
    missing numbers as states), as one function of the native ensemble: a refitted
    surrogate is read exactly as the first one was."""
    info = ws_ensemble.meta.get("missing")
    feats = [] if info is None else list(info["features"])
    fill = [] if info is None else list(info["fill"])

    def view(native: TreeEnsemble) -> TreeEnsemble:
        out = expand(native)
        if feats or out.routes_missing:
            out = missing.expand(out, feats, fill)
        return out
    return view


def _data_categories(bb: BlackBoxModel, table: pd.DataFrame) -> BlackBoxModel:
    """Categories, read from the data, of the inputs a model takes as text without
    listing their values (an ONNX graph's string inputs)."""
    names = list(bb.meta.get("categories_from_data") or ())
    if not names:
        return bb
    absent = [n for n in names if n not in table.columns]
    if absent:
        raise SchemaError(f"The model takes the text columns {absent[:6]}, which the table does not have.")
    cats = list(bb.categories)
    for n in names:
        values = table[n].dropna()
        cats[list(bb.feature_names).index(n)] = tuple(sorted({str(v) for v in values}))
    return bb.with_categories(cats)


def _linear_of(model: Any) -> tuple[LinearModel | None, Any]:
    """(the LinearModel, the original object or None) when ``model`` is a linear model: a
    LinearModel, a loaded file holding one (``.ensemble``), or a fitted linear model."""
    if isinstance(model, LinearModel):
        return model, None
    inner = getattr(model, "ensemble", None)
    if isinstance(inner, LinearModel):
        return inner, getattr(model, "model", None)
    if isinstance(model, ModelShape) or inner is not None or not is_linear(model):     # (one of the other kinds)
        return None, None
    lin = model_from(model)
    if not isinstance(lin, LinearModel):        # is_linear said it is one: its parser gives a LinearModel
        raise UnsupportedModelError(f"This {type(model).__name__} was not read as a linear model.")
    return lin, model


def _distilled(bb: BlackBoxModel | LinearModel, table: pd.DataFrame, drop_missing: bool, confirm_positions: bool
               ) -> tuple[BlackBoxModel | LinearModel, Surrogate]:
    """The model with the data's names when matched by position, and a surrogate distilled
    from its answers on (a seeded sample of at most :data:`SURROGATE_ROWS` of) the table's rows."""
    sources, _, positional = match_columns(bb, table, confirm_positions=confirm_positions)
    if positional:
        names = [s.describe() if s.one_hot else s.column for s in sources]
        bb = bb.with_names(names) if isinstance(bb, BlackBoxModel) else replace(bb, feature_names=tuple(names))
    codes, kept, _ = encode(bb, table, sources, drop_missing, keep_missing=bb.routes_missing and not drop_missing)
    rng = np.random.default_rng(0)
    sample = codes if len(codes) <= SURROGATE_ROWS else codes[np.sort(rng.choice(len(codes), SURROGATE_ROWS,
                                                                                  replace=False))]
    return bb, distill(bb, sample, random_state=0)


def _surrogate_facts(bb: BlackBoxModel | LinearModel, surrogate: Surrogate) -> dict[str, Any]:
    """The model's source and its surrogate's size and agreement, for display."""
    facts: dict[str, Any] = {
        "model": bb.source, "surrogate": f"{surrogate.native.n_trees} trees, {surrogate.native.n_leaves:,} leaves",
        "surrogate agreement (held-out rows)": round(surrogate.fidelity, 4)}
    if surrogate.boundary_fidelity is not None:
        facts["surrogate agreement (near the boundary)"] = round(surrogate.boundary_fidelity, 4)
    return facts


def _agreement_text(surrogate: Surrogate) -> str:
    """How often the surrogate agrees with the model, as the notes say it."""
    fid = f"{100 * surrogate.fidelity:.1f}%"
    near = "" if surrogate.boundary_fidelity is None else \
        f", {100 * surrogate.boundary_fidelity:.1f}% of points near its decision boundary"
    return f"{fid} of held-out rows{near}"


def _linear_workspace(ws: Workspace, bb: LinearModel, original: Any, surrogate: Surrogate) -> Workspace:
    """The surrogate's workspace turned into the linear model's, read exactly over its columns."""
    lin = expand(bb)
    if tuple(lin.feature_names) != tuple(ws.ensemble.feature_names):
        raise SchemaError("The linear model was not read as the data's columns; please report it.")
    note = (f"This linear model ({bb.source}) is read exactly: its optimal counterfactuals are proven optimal "
            "by a MILP on its score and its decision regions are drawn from its exact boundary. The analyses "
            f"that need a tree ensemble (FCCA, the regions' projections) run on a surrogate of it, which agrees "
            f"with it on {_agreement_text(surrogate)}.")
    facts = {**lin.summary(), "kind": "linear (read exactly)", **_surrogate_facts(bb, surrogate)}
    return replace(ws, model=original, surrogate=surrogate, linear=lin, model_facts=facts, notes=(note,) + ws.notes)


def _black_box_workspace(ws: Workspace, bb: BlackBoxModel, surrogate: Surrogate) -> Workspace:
    """The surrogate's workspace turned into the model's, run in its worker (every answer checked on it)."""
    note = (f"This model ({bb.source}) is not read exactly: it runs in a separate, sandboxed process, and every "
            "answer shown is checked on it. The exact analyses (optimal counterfactuals, decision regions, "
            f"FCCA) run on a tree-ensemble surrogate fitted to its answers, which agrees with it on "
            f"{_agreement_text(surrogate)}.")
    facts = {"kind": "any other model (run in a sandboxed worker)", **_surrogate_facts(bb, surrogate)}
    return replace(ws, model=bb, surrogate=surrogate, model_facts=facts,
                   notes=(note,) + tuple(n for n in ws.notes if "far below its own" not in n))


def _answered_workspace(df: pd.DataFrame, target: str | None, bb: BlackBoxModel | LinearModel, original: Any, *,
                        name: str, data_sha256: str, model_sha256: str, drop_missing: bool,
                        model_info: dict[str, Any] | None, schema: Schema | None, confirm_positions: bool,
                        protected: Sequence[str] | None) -> Workspace:
    """A workspace for a linear model or a model known by its answers: the table matched to
    its features as for any model, a surrogate distilled from its answers on the rows (and
    near its decision boundary, :func:`core.surrogate.distill`) for the analyses that need
    a tree ensemble, the surrogate's view built as a tree ensemble's would be, and the model
    kept for every answer and every check (a linear one over the view's columns, exactly)."""
    table = _feature_table(df, target)
    if isinstance(bb, BlackBoxModel):
        bb = _data_categories(bb, table)
    bb, surrogate = _distilled(bb, table, drop_missing, confirm_positions)
    ws = build_workspace(df, target, surrogate.native, name=name, data_sha256=data_sha256,
                         model_sha256=model_sha256, drop_missing=drop_missing, model_info=model_info, schema=schema,
                         confirm_positions=False, protected=protected)
    surrogate = surrogate.with_view(_analysis_view(ws.ensemble))
    if surrogate.ensemble.feature_names != ws.ensemble.feature_names:
        raise SchemaError("The surrogate of this model was not read as the data's columns; please report it.")
    if isinstance(bb, LinearModel):
        out = _linear_workspace(ws, bb, original, surrogate)
    else:
        out = _black_box_workspace(ws, bb, surrogate)
    warn = _label_mismatch(out)
    return replace(out, notes=out.notes + (warn,)) if warn and warn not in out.notes else out
