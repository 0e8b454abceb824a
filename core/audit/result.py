"""The result of a fairness audit (:class:`Audit`) and its saved forms.

An :class:`Audit` is what :func:`core.audit.run_audit` returns: its per-row,
per-group and per-test tables, the summary and the provenance. It serialises to
JSON, to a self-contained HTML report (:mod:`core.audit.report`) and to per-row CSV,
and re-opens a saved one with a check that everything shown is there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np
import pandas as pd

from core.audit.figures import cost_figure, metric_figure
from core.audit.metrics import METRICS
from core.audit.report import audit_html, extract_audit_json, group_table, tests_table
from core.errors import AuditError
from core.intake.csvsafe import to_csv
from core.model import Guarantee
from core.model.guarantee import MODEL_KINDS, with_guarantee
from core.model.result import FORMAT, MetaResult

__all__ = ["Audit"]


_OLD_FORMAT = "counterfactual-atlas-audit"     # audits saved before the one result shape; they still open


def saved_guarantee(saved: object) -> Guarantee | None:
    """A guarantee as a saved result recorded it (None: none recorded, or not readable)."""
    if not isinstance(saved, Mapping):
        return None
    try:
        return Guarantee.from_dict(dict(saved))
    except (TypeError, ValueError):
        return None


def _found_statuses(rows: pd.DataFrame | None) -> set[str]:
    """The statuses of the audited rows with a recourse (none in a table without them)."""
    if rows is None or not {"status", "feasible"} <= set(rows):
        return set()
    return set(rows[rows["feasible"] == 1]["status"].astype(str))


def _frame(x: dict[str, Any]) -> pd.DataFrame:
    """A saved table; a recourse's values (numbers, categories, None) stay as written.
    A column with no value in any row (JSON writes a missing number as null) is a column
    of numbers, all missing: the costs of an audit where no row has a recourse."""
    df = pd.DataFrame(x["data"], columns=x["columns"], dtype=object)
    out = df.infer_objects()
    for c in df.columns:
        if str(c).startswith("cf:"):
            out[c] = df[c]
        elif len(df) and df[c].isna().all():
            out[c] = df[c].astype(np.float64)
    return out


def _optional_frame(d: Mapping[str, Any], name: str) -> pd.DataFrame | None:
    """A saved table that older audits do not have (None then)."""
    return _frame(d[name]) if d.get(name) else None


def _need(ok: bool | np.bool_, what: str) -> None:
    """Refuse a damaged saved audit, saying what is wrong with it."""
    if not ok:
        raise AuditError(f"The saved audit is damaged: {what}. Re-save it from the app.")


def _numeric(df: pd.DataFrame, col: str) -> bool:
    """A column of numbers (or nothing but missing values)."""
    return bool(pd.api.types.is_numeric_dtype(df[col]) or df[col].isna().all())


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(t, str) for t in v)


def _check_meta(m: Any, summary: Any) -> None:
    """The metadata and summary hold what the page and the report read, of the right types."""
    _need(isinstance(m, dict), "its metadata is not an object")
    _need(_texts(summary), "its summary is not a list of sentences")
    for key in ("data", "model", "parameters", "timings", "versions", "schema"):
        _need(isinstance(m.get(key, {}), dict), f"'{key}' is not an object")
    _need(isinstance(m.get("created", ""), str), "'created' is not text")
    _need(_texts(m.get("notes", [])), "'notes' is not a list of sentences")
    _need(all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in m.get("timings", {}).values()),
          "'timings' holds something other than seconds")
    features = m.get("schema", {}).get("features", [])
    _need(isinstance(features, list) and all(isinstance(f, dict) for f in features),
          "its schema's features are not a list of objects")


def _check_tests(tests: pd.DataFrame) -> None:
    """The table of gaps, when not empty, has its columns, numbers as numbers."""
    if not len(tests):
        return
    _need({"attribute", "group", "reference", "label", "group_value", "reference_value", "gap", "gap_lo",
           "gap_hi", "p_value", "p_holm", "significant"} <= set(tests.columns),
          "its table of gaps lacks columns")
    for col in ("group_value", "reference_value", "gap", "gap_lo", "gap_hi", "p_value", "p_holm"):
        _need(_numeric(tests, col), f"the gap column {col!r} is not numeric")
    _need(pd.api.types.is_bool_dtype(tests["significant"]), "'significant' is not true/false")


def _check_disparities(disparities: pd.DataFrame | None) -> None:
    """The table of disparities, when there is one, has its columns, numbers as numbers."""
    if disparities is None or not len(disparities):
        return
    _need({"attribute", "measure", "value", "lo", "hi"} <= set(disparities.columns),
          "its table of disparities lacks columns")
    for col in ("value", "lo", "hi"):
        _need(_numeric(disparities, col), f"the disparity column {col!r} is not numeric")


@dataclass(frozen=True, eq=False)
class Audit(MetaResult):
    """The audit's tables, summary and provenance (see :mod:`core.audit`); a
    :class:`core.model.result.Result`: ``params`` (the audit's parameters, ``meta``'s
    ``parameters``), ``elapsed`` (its total seconds, ``meta``'s ``timings``) and
    ``guarantee`` (``estimated``: the group figures are estimates on the audited rows).

    rows : one row per audited row (index into the data, group labels, recourse, rules): its
        recourse's cost, ``n_changed`` (the analyst's columns it changes; a fill of a missing
        value or a category switch is one), ``changes`` as text and, beside them, the
        recourse's value of every column at full precision (``cf:<column>``, None where
        missing or without a recourse; :func:`core.intake.columns.recourse_frame`), and the
        seconds its recourse took, ``elapsed`` (``solve_time`` in audits saved before).
    groups : per attribute and group, the metrics with their intervals.
    tests : per attribute, group, metric: the gap to the reference group, its
        interval, the permutation p-value and the Holm-adjusted one.
    rules : per attribute and group, the T-CREx rules most often prescribed.
    summary : sentences, largest significant gaps first.
    meta : parameters, fingerprints, schema, package versions, timings.
    counterfactuals : each audited row's optimal recourse point in the model's features
        (NaN when none), kept in memory only (the saved audit has it in the analyst's
        columns, ``rows``' ``cf:<column>``).
    fairness, disparities : standard group fairness of the model's decisions on
        every row (:mod:`core.audit.groupfair`, fairlearn's metrics): per group and
        intersection, and the parity differences/ratios per attribute.
    """

    rows: pd.DataFrame
    groups: pd.DataFrame
    tests: pd.DataFrame
    rules: pd.DataFrame
    summary: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    counterfactuals: np.ndarray | None = None   # (len(rows), n_features), NaN without one; not saved
    fairness: pd.DataFrame | None = None        # group fairness of the decisions (core.audit.groupfair), all rows
    disparities: pd.DataFrame | None = None     # demographic parity / equalised odds per attribute
    subgroups: pd.DataFrame | None = None       # the subgroup scan of recourse (core.audit.subgroups)

    kind: ClassVar[str] = "audit"
    what: ClassVar[str] = "audit"

    @property
    def precluded(self) -> pd.DataFrame:
        """Per attribute and group, the audited rows and those *precluded*: proven to have no
        action (under the constraints in force: those given to the audit, else the schema's)
        that gives the target, and their share of the rows whose recourse was decided; columns
        ``attribute``, ``group``, ``rows``, ``precluded``, ``share``. The gap in that share
        between groups is tested with the audit's other gaps (metric ``precluded`` in
        :attr:`tests`)."""
        out = []
        decided = self.rows["status"].isin(["optimal", "feasible", "time_limit_found", "infeasible"])
        flag = (self.rows["precluded"] if "precluded" in self.rows else self.rows["status"] == "infeasible")
        for a in [c[len("group:"):] for c in self.rows.columns if str(c).startswith("group:")]:
            labels = self.rows[f"group:{a}"].astype(str)
            for g in labels.drop_duplicates():
                here = labels == g
                n_dec = int((here & decided).sum())
                n = int((here & decided & flag.astype(bool)).sum())
                out.append({"attribute": a, "group": g, "rows": int(here.sum()), "precluded": n,
                            "share": n / n_dec if n_dec else float("nan")})
        return pd.DataFrame(out, columns=["attribute", "group", "rows", "precluded", "share"])

    @property
    def references(self) -> dict[str, str]:
        """Each attribute's reference group, {attribute: group}: the group its gaps (:attr:`tests`)
        are measured against (``run_audit(..., reference=audit.references)`` tests the same pairs
        on other rows or another model)."""
        g = self.groups
        if not len(g) or "reference" not in g:
            return {}
        ref = g[g["reference"].astype(bool)]
        return {str(a): str(v) for a, v in zip(ref["attribute"], ref["group"])}

    @property
    def guarantee(self) -> Guarantee:  # type: ignore[override]
        kind = (self.meta.get("model") or {}).get("kind")
        return Guarantee("estimated", kind if kind in MODEL_KINDS else "tree_ensemble", note=(
            "Each group's figures are estimates on the audited rows, with intervals (Wilson's for a share "
            "of rows, else the bootstrap's) and permutation tests; each row's recourse carries its own status."))

    @property
    def recourse_guarantee(self) -> Guarantee:
        """What every recourse the audit found holds (the weakest of those rows'): as the
        audit recorded it, or, for an audit saved before it did, as its model kind and the
        rows' statuses say (a surrogate's answer is checked, never proven optimal)."""
        meta = getattr(self, "meta", None) or {}
        saved = saved_guarantee(meta.get("recourse_guarantee"))
        if saved is not None:
            return saved
        model = meta.get("model") or {}
        kind = model.get("kind") if model.get("kind") in MODEL_KINDS else "tree_ensemble"
        if kind == "black_box":
            fid = (model.get("surrogate") or {}).get("fidelity")
            return Guarantee("valid_on_model", "black_box", surrogate_fidelity=fid)
        statuses = _found_statuses(getattr(self, "rows", None))
        order = [("time_limit_found", "time_limited"), ("feasible", "valid_on_model"), ("optimal", "proven_optimal")]
        worst = next((g for st, g in order if st in statuses), "not_found")
        return Guarantee(worst, kind)  # type: ignore[arg-type]

    def _compared(self) -> tuple[str, ...]:
        return ("rows", "groups", "tests", "rules", "summary", "meta", "fairness", "disparities", "subgroups")

    def to_dict(self) -> dict[str, Any]:
        def cell(v: Any) -> Any:
            if isinstance(v, (np.bool_, bool)):
                return bool(v)
            if isinstance(v, (np.integer,)):
                return int(v)
            if isinstance(v, (float, np.floating)):
                return float(v) if np.isfinite(v) else None
            if v is pd.NA or v is pd.NaT:
                return None
            return v

        def frame(df: pd.DataFrame) -> dict[str, Any]:   # floats kept exactly (json writes repr)
            return {"columns": [str(c) for c in df.columns],
                    "data": [[cell(v) for v in row] for row in df.itertuples(index=False, name=None)]}

        out = {**self.header(), "rows": frame(self.rows),
               "groups": frame(self.groups), "tests": frame(self.tests), "rules": frame(self.rules),
               "summary": list(self.summary), "meta": self.meta}
        for name in ("fairness", "disparities", "subgroups"):
            table = getattr(self, name)
            if table is not None:
                out[name] = frame(table)
        return out

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Audit":
        """A saved audit (the result shape, or the format before it)."""
        if not isinstance(d, Mapping) or not (d.get("format") == _OLD_FORMAT
                                              or (d.get("format") == FORMAT and d.get("kind") == cls.kind)):
            raise AuditError("This file is not a saved audit of Counterfactual Atlas (no audit data inside).")

        try:
            rows = _frame(d["rows"]).rename(columns={"solve_time": "elapsed"})     # its older name
            out = cls(rows, _frame(d["groups"]), _frame(d["tests"]), _frame(d["rules"]),
                      list(d["summary"]), dict(d["meta"]),
                      fairness=_optional_frame(d, "fairness"),       # older audits: none
                      disparities=_optional_frame(d, "disparities"),
                      subgroups=_optional_frame(d, "subgroups"))
        except (KeyError, TypeError, ValueError) as exc:
            raise AuditError(f"The saved audit is incomplete or damaged ({type(exc).__name__}: {exc}).") from None
        need = {"row", "status", "feasible", "cost"}
        if not need <= set(out.rows.columns) or not {"attribute", "group", "reference"} <= set(out.groups.columns):
            raise AuditError("The saved audit is incomplete: its per-row or per-group table lacks columns.")
        out.validate()
        return out

    def validate(self) -> None:
        """Check that everything the page and the report read is there with the
        right types, and draw its tables and figures once: a damaged or crafted
        audit is refused here with a message instead of failing while shown."""
        _check_meta(self.meta, self.summary)
        protected = self.meta.get("parameters", {}).get("protected", {})
        _need(isinstance(protected, dict), "its protected attributes are not an object")
        self._check_tables(protected)
        try:
            group_table(self), tests_table(self)
            for a in protected:
                cost_figure(self, a), metric_figure(self, a, "feasible")
        except Exception as exc:  # noqa: BLE001 - any failure to draw means a damaged file
            raise AuditError(f"The saved audit is damaged: it cannot be drawn ({type(exc).__name__}: {exc}). "
                             "Re-save it from the app.") from None

    def _check_tables(self, protected: dict[str, Any]) -> None:
        """The tables' columns the page and the report read are there, numbers as numbers."""
        for col in ("feasible", "cost"):
            _need(_numeric(self.rows, col), f"the per-row column {col!r} is not numeric")
        for a in protected:
            _need(f"group:{a}" in self.rows.columns, f"the per-row table has no groups for attribute {a!r}")
        for key in METRICS:
            for col in (key, f"{key}_lo", f"{key}_hi"):
                if col in self.groups:
                    _need(_numeric(self.groups, col), f"the per-group column {col!r} is not numeric")
        _check_tests(self.tests)
        _check_disparities(self.disparities)
        if self.fairness is not None and len(self.fairness):
            _need({"attribute", "group", "n"} <= set(self.fairness.columns), "its group-fairness table lacks columns")

    @classmethod
    def from_file(cls, data: bytes) -> "Audit":
        """Re-open a saved audit: its JSON, or the HTML report (which embeds it)."""
        text = data.decode("utf-8", errors="replace")
        if "<html" in text[:2000].lower():
            text = extract_audit_json(text)
        try:
            d = json.loads(text)
        except json.JSONDecodeError:
            raise AuditError("The file is neither an audit JSON nor an audit report (HTML) of this app.") from None
        return cls.from_dict(d)

    def rows_csv(self) -> str:
        """The per-row table, with what each row's recourse guarantees in its last two columns."""
        return to_csv(with_guarantee(self.rows, self.recourse_guarantee))

    def to_html(self) -> str:
        return audit_html(self)
