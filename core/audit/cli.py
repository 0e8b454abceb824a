"""The fairness audit's command line (no UI): ``python -m core.audit``.

Loads a table and a model as the app does (:func:`core.intake.workspace.build_workspace`),
runs :func:`core.audit.run.run_audit`, writes the HTML report and the per-row CSV
beside it and prints the summary::

    python -m core.audit --data credit.csv --model model.json --protected sex \\
        --target 1 [--scheduler tcp://HOST:8786] [--rows 500] --out report.html

With ``--compare-model other.json`` it compares the two model versions instead
(:func:`core.audit.compare.compare_models`: agreement, recourse invalidation per
group) and writes that report and its per-row CSV.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from core.audit.compare import compare_models
from core.audit.result import Audit
from core.audit.run import run_audit
from core.errors import AuditError, PositionalMatchRequired
from core.intake import io
from core.intake.matching import norm_text
from core.intake.workspace import Workspace, build_workspace
from core.schema import Schema, suggest_protected
from core.typing import TargetSpec

if TYPE_CHECKING:
    from core.model import TreeEnsemble

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m core.audit", description="Audit recourse across protected groups.")
    ap.add_argument("--data", required=True, help="CSV or Parquet table (with the target column, if any)")
    ap.add_argument("--model", required=True, help="model file (XGBoost/LightGBM JSON or text, skops, pickle)")
    ap.add_argument("--protected", required=True, action="append",
                    help="protected column or one-hot group (repeat for several)")
    ap.add_argument("--target", help="favourable class (default: the last class, e.g. 1), or LO,HI for a regressor")
    ap.add_argument("--target-column", help="name of the label column in the data, if not detected")
    ap.add_argument("--schema", help="feature settings JSON saved from the app")
    ap.add_argument("--rows", type=int, default=500, help="audit at most this many unfavourable rows (0: all)")
    ap.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    ap.add_argument("--jobs", type=int, default=1, help="local processes when no scheduler is given")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per recourse")
    ap.add_argument("--norm", default="l1", choices=["l0", "l1", "l2"])
    ap.add_argument("--permutations", type=int, default=2000)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--local-rules", type=int, default=10, help="rows per group given a local rule")
    ap.add_argument("--no-tcrex", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-subgroup", type=int, default=20, help="smallest subgroup the scan considers (rows)")
    ap.add_argument("--budget", type=float, default=None,
                    help="recourse cost budget of the scan's effectiveness (default: the median cost)")
    ap.add_argument("--no-scan", action="store_true", help="skip the subgroup scan")
    ap.add_argument("--trust-pickle", action="store_true", help="allow loading a pickle/joblib model file")
    ap.add_argument("--by-position", action="store_true",
                    help="match a model without feature names to the data's columns by position (check the "
                         "mapping printed without this flag first)")
    ap.add_argument("--compare-model", help="a second version of the model: compare the two (agreement, recourse "
                                            "invalidation per group) instead of auditing one")
    ap.add_argument("--out", default="audit_report.html", help="HTML report; the per-row CSV goes beside it")
    return ap


def _workspace(a: argparse.Namespace, data_bytes: bytes, model_bytes: bytes) -> Workspace | None:
    """The data and model as the app loads them; None (after printing the proposed
    mapping) when a model without feature names needs ``--by-position``."""
    df = io.load_table(data_bytes, Path(a.data).name)
    target_col = a.target_column or df.attrs.get("target")
    model = io.load_model(model_bytes, Path(a.model).name, allow_pickle=a.trust_pickle)
    schema = Schema.from_json(Path(a.schema).read_bytes()) if a.schema else None
    try:
        ws = build_workspace(df, target_col, model, name=Path(a.data).name, schema=schema,
                             confirm_positions=a.by_position, protected=a.protected)
        label = None if target_col else _label_column(ws, df)
        if label is None:
            return ws
        print(f"note: column {label!r} is read as the label column (its values are the model's classes); "
              "give --target-column to choose another.")
        return build_workspace(df, label, model, name=Path(a.data).name, schema=schema,
                               confirm_positions=a.by_position, protected=a.protected)
    except PositionalMatchRequired as exc:
        print(f"error: {exc}")
        for feat, col in exc.mapping:
            print(f"  {feat} <- {col}")
        print("If this mapping is right, run again with --by-position.")
        return None


def _unaudited(a: argparse.Namespace, ws: Workspace) -> list[str]:
    """Lines naming the columns that read like a protected attribute but are not among
    ``--protected``: the audit never adds them itself (the auditor chooses what to audit),
    it says so, with the flag that would."""
    given = set(a.protected)
    out = []
    for c in ws.columns:
        reason = suggest_protected([c.name]).get(c.name)
        if reason is None or c.name in given:
            continue
        fixed = all(ws.schema.features[j].actionability == "fixed" for j in c.features)
        out.append(f"note: column {c.name!r} is not audited{'' if fixed else ' and may change in counterfactuals'}, "
                   f"though {reason}; add --protected {shlex.quote(c.name)} to audit it"
                   f"{'' if fixed else ' and hold it fixed'}.")
    return out


def _target(a: argparse.Namespace, ens: TreeEnsemble) -> TargetSpec:
    """The favourable outcome: a class of a classifier (default: its last), or LO,HI for a regressor."""
    if ens.is_classifier and ens.classes is not None:          # a classifier always has its classes
        classes = [str(c) for c in ens.classes]
        target = a.target if a.target is not None else classes[-1]
        return ens.classes[classes.index(str(target))] if str(target) in classes else target
    if not a.target or "," not in a.target:
        raise AuditError("A regressor needs --target LO,HI (the favourable interval of predictions).")
    return tuple(float(v) for v in a.target.split(","))


def _settings(a: argparse.Namespace) -> dict[str, Any]:
    return dict(max_rows=a.rows or None, norm=a.norm, time_limit=a.time_limit, n_jobs=a.jobs,
                         scheduler=a.scheduler, n_boot=a.bootstrap, n_perm=a.permutations, tcrex=not a.no_tcrex,
                         local_rules_per_group=a.local_rules, random_state=a.seed, scan=not a.no_scan,
                         min_subgroup=a.min_subgroup, budget=a.budget)


def _show(stage: str, done: int, total: int) -> None:
    print(f"\r{stage}: {done}/{total}", end="", flush=True)


def _print_findings(audit: Audit) -> None:
    """The summary, the group fairness of the decisions and the subgroups that differ most."""
    for line in audit.summary:
        print(line)
    if audit.disparities is not None and len(audit.disparities):
        print("Group fairness of the decisions (95% bootstrap intervals):")
        for r in audit.disparities.itertuples():
            print(f"  {r.attribute}: {r.measure} {r.value:.3f} [{r.lo:.3f}, {r.hi:.3f}]")
    if audit.subgroups is not None and len(audit.subgroups):
        print("Subgroups where recourse differs most (adjusted over the scan):")
        for r in audit.subgroups.head(5).itertuples():
            print(f"  {r.subgroup} ({r.size} rows): {r.label} {r.value:.3g} vs {r.rest:.3g}, "
                  f"adjusted p {r.p_adjusted:.3g}{' *' if r.significant else ''}")


def _label_column(ws: Workspace, df: Any) -> str | None:
    """The one column the model does not use whose values are all the classifier's
    classes (as the Data & model page offers the last column), or None."""
    if ws.ensemble.task != "classification" or ws.ensemble.classes is None:
        return None
    classes = {norm_text(c) for c in ws.ensemble.classes}
    fits = [c for c in ws.ignored if df[c].notna().all() and {norm_text(v) for v in df[c].unique()} <= classes]
    return fits[0] if len(fits) == 1 else None


def _compare(a: argparse.Namespace, ws: Workspace, data_bytes: bytes, model_bytes: bytes) -> int:
    """``--compare-model``: model B read on the same data, compared with model A."""
    other_bytes = Path(a.compare_model).read_bytes()
    other = io.load_model(other_bytes, Path(a.compare_model).name, allow_pickle=a.trust_pickle)
    wb = build_workspace(ws.raw, ws.target, other, name=Path(a.compare_model).name,
                         confirm_positions=a.by_position, protected=a.protected)
    if list(wb.X.columns) != list(ws.X.columns) or wb.X.shape != ws.X.shape or \
            not (wb.X.to_numpy(dtype=float) == ws.X.to_numpy(dtype=float)).all():
        raise AuditError("The second model reads the data differently (other columns, rows or category codes); "
                         "give a model trained on the same columns.")
    (on_a, extra_a), (on_b, extra_b) = _side(ws, "a"), _side(wb, "b")
    c = compare_models(on_a, on_b, ws.X, schema=ws.schema, target=_target(a, ws.ensemble),
                       protected=a.protected, max_rows=a.rows or None, time_limit=a.time_limit, norm=a.norm,
                       n_jobs=a.jobs, scheduler=a.scheduler, **extra_a, **extra_b,
                       random_state=a.seed, n_boot=a.bootstrap, n_perm=a.permutations, progress=_show,
                       provenance={"data_name": Path(a.data).name, "data_sha256_file": io.sha256(data_bytes),
                                   "model_a_sha256": io.sha256(model_bytes),
                                   "model_b_sha256": io.sha256(other_bytes)})
    print()
    out = Path(a.out)
    out.write_text(c.to_html(), encoding="utf-8")
    csv = out.with_suffix(".csv")
    csv.write_text(c.rows_csv(), encoding="utf-8")
    print(f"Decisions alike: {c.agreement.iloc[0]['agree']:.1%} of {len(ws.X)} rows.")
    print(f"Recourse under the first model not honoured by the second: {c.invalidated:.1%}.")
    for g in c.groups.itertuples():
        print(f"  {g.attribute} = {g.group}: {g.invalidated:.1%} [{g.ci_low:.1%}, {g.ci_high:.1%}]")
    for t in c.tests.itertuples():
        print(f"  gap {t.attribute} = {t.group} vs {t.reference}: {t.gap:+.1%}, adjusted p {t.p_adjusted:.3g}"
              f"{' *' if t.significant else ''}")
    print(f"Report: {out}  Rows: {csv}")
    return 0


def _side(ws: Workspace, side: str) -> tuple[Any, dict[str, Any]]:
    """What the comparison solves for model ``side`` ("a" or "b") of any kind: a tree ensemble,
    a linear model read exactly (with the surrogate a recourse valid for both reads), or any
    other model's surrogate with the model; and its keyword arguments."""
    on, extra = ws.query_model()
    return on, {f"model_{side}": extra["model"], f"surrogate_{side}": ws.surrogate}


def main(argv: Sequence[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        data_bytes = Path(a.data).read_bytes()
        model_bytes = Path(a.model).read_bytes()
        ws = _workspace(a, data_bytes, model_bytes)
        if ws is None:
            return 2
        for note in ws.notes:
            print(f"note: {note}")
        for line in _unaudited(a, ws):
            print(line)
        if a.compare_model:
            return _compare(a, ws, data_bytes, model_bytes)
        on, extra = ws.query_model()          # a linear model exactly, not through its surrogate
        audit = run_audit(on, ws.X, schema=ws.schema, target=_target(a, ws.ensemble),
                          protected=a.protected, y=ws.y, data_name=Path(a.data).name, **extra,
                          data_sha256=io.sha256(data_bytes), model_sha256=io.sha256(model_bytes),
                          progress=_show, **_settings(a))
        print()
        out = Path(a.out)
        out.write_text(audit.to_html(), encoding="utf-8")
        csv = out.with_suffix(".csv")
        csv.write_text(audit.rows_csv(), encoding="utf-8")
        _print_findings(audit)
        print(f"Report: {out}  Rows: {csv}")
        return 0
    except (ValueError, OSError) as exc:
        print(f"\nerror: {exc}")
        return 2
