"""The audit across processes (core.audit.stages): every stage's work is a task of the run's
map, each task self-contained (it runs on what a worker receives), and the audit's answers
are the same with one process, two, or a Dask cluster."""

from __future__ import annotations

import json
import pickle

import pytest
from conftest import demo_credit

import core.audit.stages as stages
from core.audit import run_audit


@pytest.fixture(scope="module")
def credit():
    return demo_credit()


def _audit(credit, **kw):
    df, target, model, ens, X, schema = credit
    return run_audit(ens, X, schema=schema, target=1, max_rows=16, model=model, n_perm=100, n_boot=50,
                     local_rules_per_group=2, y=df[target].to_numpy(), **kw)


def _answers(audit) -> str:
    """The audit's JSON without its timings and how it ran (processes, cluster)."""
    d = audit.to_dict()
    d.pop("elapsed", None)
    for held in (d.get("params", {}), d["meta"]["parameters"]):
        held.pop("n_jobs", None)
        held.pop("scheduler", None)
    for k in ("created", "timings", "versions"):
        d["meta"].pop(k, None)
    rows = d["rows"]
    at = rows["columns"].index("elapsed")
    for r in rows["data"]:
        r[at] = None
    return json.dumps(d, sort_keys=True, default=str)


@pytest.fixture(scope="module")
def one_process(credit):
    return _audit(credit, n_jobs=1)


def test_every_stage_is_a_task_that_runs_on_what_a_worker_receives(credit, one_process, monkeypatch):
    """Each stage's work goes through the run's map, and each task runs from its pickled
    function alone, as a process of the pool or a cluster's worker gets it."""
    kinds = []

    def as_workers(fn, items, *, on_chunk=None, **kw):
        out = []
        for i, item in enumerate(items):
            res = pickle.loads(pickle.dumps(fn))(pickle.loads(pickle.dumps(item)))
            kinds.append(res[0])
            out.append(pickle.loads(pickle.dumps(res)))
            if on_chunk is not None:
                on_chunk(i, [out[-1]])
        return out

    monkeypatch.setattr(stages, "map_rows", as_workers)
    audit = _audit(credit, n_jobs=1)
    assert {"recourse", "rules", "tcrex", "fairness", "rule", "scan"} <= set(kinds)
    assert kinds.count("rule") == int((audit.rows["local_rule"] != "").sum()) >= 4   # 2 rows of each group
    assert _answers(audit) == _answers(one_process)


def test_the_same_audit_with_one_process_two_and_a_cluster(credit, one_process, dask_scheduler):
    two = _audit(credit, n_jobs=2)
    cluster = _audit(credit, scheduler=dask_scheduler)
    assert _answers(two) == _answers(one_process)
    assert _answers(cluster) == _answers(one_process)
    assert one_process.rows["feasible"].sum() > 0 and len(one_process.rules) and len(one_process.fairness)
