"""Audit history (core.audit.history): audits survive the store being closed and
re-opened, owners never see each other's audits, concurrent writers all land,
and two audits compare gap by gap; each on SQLite and on a real PostgreSQL
(``new_history``, tests/pgcluster.py)."""

from __future__ import annotations

import multiprocessing as mp
import zlib

import pandas as pd
import pgcluster
import pytest
import sqlalchemy as sa
from conftest import demo_credit

from core.audit import Audit, run_audit
from core.audit.history import AUDITS, LOCAL_OWNER, AuditStore, HistoryError, compare, default_url, new_owner_key

new_history = pgcluster.new_history    # the fixture: each test taking it runs on SQLite and PostgreSQL
pg_cluster = pgcluster.pg_cluster      # the fixture new_history takes for PostgreSQL (one per session)


@pytest.fixture(scope="module")
def small_audit():
    _, _, model, ens, X, schema = demo_credit()
    return run_audit(ens, X, schema=schema, target=1, max_rows=120, n_jobs=1, model=model, n_perm=300,
                     n_boot=100, local_rules_per_group=1)


def test_saved_audit_reopens_identically_after_a_restart(small_audit, new_history):
    url = new_history()
    i = AuditStore(url).save(small_audit, title="credit v1")
    store = AuditStore(url)                              # a new process would do just this
    listed = store.list()
    assert list(listed["id"]) == [i] and listed["title"][0] == "credit v1"
    assert listed["n_rows"][0] == len(small_audit.rows)
    back = store.load(i)
    assert back.to_dict() == Audit.from_dict(small_audit.to_dict()).to_dict()
    assert back.to_html().startswith("<!DOCTYPE html")


def test_owners_are_isolated(small_audit, new_history):
    store = AuditStore(new_history())
    alice, bob = new_owner_key(), new_owner_key()
    a = store.save(small_audit, owner=alice)
    store.save(small_audit, owner=LOCAL_OWNER)
    assert list(store.list(owner=alice)["id"]) == [a]
    assert store.list(owner=bob).empty
    with pytest.raises(HistoryError, match="another key"):
        store.load(a, owner=bob)
    assert not store.delete(a, owner=bob) and store.delete(a, owner=alice)
    with store.engine.connect() as con:                  # keys are stored only as hashes
        owners = set(con.execute(sa.select(AUDITS.c.owner)).scalars())
    assert alice not in owners and LOCAL_OWNER in owners


def _write(args):
    url, payload, n = args
    store = AuditStore(url)
    audit = Audit.from_dict(payload)
    return [store.save(audit) for _ in range(n)]


def test_concurrent_writers_all_land(small_audit, new_history):
    url = new_history()
    AuditStore(url)
    payload = small_audit.to_dict()
    with mp.get_context("fork").Pool(4) as pool:     # forked: no child imports the project again
        ids = sum(pool.map_async(_write, [(url, payload, 5)] * 4).get(timeout=300), [])
    assert len(set(ids)) == 20
    assert len(AuditStore(url).list()) == 20


def test_damaged_record_and_bad_url_say_so(small_audit, new_history):
    store = AuditStore(new_history())
    i = store.save(small_audit)
    with store.engine.begin() as con:
        con.execute(AUDITS.update().values(audit=zlib.compress(b"{not json")))
    with pytest.raises(HistoryError, match="damaged"):
        store.load(i)
    with pytest.raises(HistoryError, match="ATLAS_HISTORY_URL"):
        AuditStore("nosuchdialect://x")


def test_compare_names_gaps_that_closed_and_opened(small_audit):
    before = small_audit
    t = before.tests.copy()
    assert len(t) >= 2
    flipped = t.copy()
    flipped["significant"] = ~t["significant"]
    flipped.loc[flipped.index[0], "gap"] = t["gap"].iloc[0] + 1.0
    after = Audit(before.rows, before.groups, flipped, before.rules, before.summary, before.meta)
    c = compare(before, after)
    assert len(c) == len(t)
    expected = t["significant"].map({True: "closed", False: "opened"}).tolist()
    got = c.set_index(["attribute", "group", "label"]).loc[
        list(zip(t["attribute"].astype(str), t["group"].astype(str), t["label"])), "change"].tolist()
    assert got == expected
    assert c["change"].iloc[0] == ("opened" if "opened" in expected else "closed")
    same = compare(before, before)
    assert set(same["change"]) <= {"persists", "none"} and (same["gap_change"] == 0).all()
    partial = Audit(before.rows, before.groups, t.iloc[1:], before.rules, before.summary, before.meta)
    assert compare(before, partial)["change"].value_counts().get("gone", 0) == 1
    assert isinstance(c, pd.DataFrame)


def test_a_public_store_refuses_local_and_anything_not_a_key(small_audit, new_history):
    """A visitor of a public instance who types `local` must not see (or re-open,
    or delete) the audits a local instance stored in the same database."""
    url = new_history()
    mine = AuditStore(url).save(small_audit, owner=LOCAL_OWNER)
    public = AuditStore(url, public=True)
    for typed in (LOCAL_OWNER, " local ", "", "short", "x" * 23, "key with spaces and more than 24"):
        with pytest.raises(HistoryError, match="not a history key"):
            public.list(owner=typed)
        with pytest.raises(HistoryError, match="not a history key"):
            public.load(mine, owner=typed)
        with pytest.raises(HistoryError, match="not a history key"):
            public.delete(mine, owner=typed)
    key = new_owner_key()
    i = public.save(small_audit, owner=key)
    assert list(public.list(owner=key)["id"]) == [i]
    with public.engine.connect() as con:             # the key is stored only as its hash
        stored = set(con.execute(sa.select(AUDITS.c.owner).where(AUDITS.c.id == i)).scalars())
    assert stored and key not in stored and all(o.startswith("k:") for o in stored)


def test_public_and_local_instances_never_share_a_default_database(monkeypatch):
    monkeypatch.delenv("ATLAS_HISTORY_URL", raising=False)
    assert default_url(public=True) != default_url(public=False)
    monkeypatch.setenv("ATLAS_HISTORY_URL", "sqlite:////tmp/chosen.sqlite")
    assert default_url(public=True) == default_url() == "sqlite:////tmp/chosen.sqlite"   # set by the operator


def _test_row(group: str, reference: str, gap: float, significant: bool) -> dict:
    return {"attribute": "employment", "group": group, "reference": reference, "metric": "cost", "label": "mean cost",
            "gap": gap, "gap_lo": gap - 0.1, "gap_hi": gap + 0.2, "p_holm": 0.01 if significant else 0.5,
            "significant": significant}


def test_compare_sets_only_gaps_between_the_same_two_groups_side_by_side(small_audit):
    """Each audit measures gaps against its own largest group; two models turn down other rows,
    so the references can differ. A gap measured the other way round is the same test (turned);
    a gap against another reference is another test, never set beside it."""
    def audit(rows: list[dict]) -> Audit:
        return Audit(small_audit.rows, small_audit.groups, pd.DataFrame(rows), small_audit.rules,
                     small_audit.summary, small_audit.meta)

    before = audit([_test_row("student", "employed", 0.5, True), _test_row("unemployed", "employed", 0.3, False)])
    after = audit([_test_row("employed", "student", -0.2, False), _test_row("unemployed", "student", 0.1, False)])
    c = compare(before, after).set_index(["group", "reference"])
    turned = c.loc[("student", "employed")]               # after's "employed vs student", in before's direction
    assert turned["change"] == "closed" and turned["gap_after"] == pytest.approx(0.2)
    assert (turned["gap_lo_after"], turned["gap_hi_after"]) == (pytest.approx(0.0), pytest.approx(0.3))
    assert turned["gap_change"] == pytest.approx(0.2 - 0.5)
    assert c.loc[("unemployed", "employed"), "change"] == "gone"        # against another reference group
    assert c.loc[("unemployed", "student"), "change"] == "new"
    assert len(c) == 3
