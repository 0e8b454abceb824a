"""The history of a team (issue #63), on SQLite and on a real PostgreSQL (tests/pgcluster.py):
records belong to their author (an OpenID provider's issuer and subject) and are private
until shared; every audit keeps its trail; a database of an older version opens upgraded,
one of a newer version is refused untouched, one that cannot be reached says so; six
processes writing at once lose nothing; an audit run again from its record gives the same
figures."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import time
import zlib
from importlib import metadata

import pandas as pd
import pgcluster
import pytest
import sqlalchemy as sa
from conftest import ROOT, demo_credit
from pgcluster import new_database

from core.audit import Audit, run_audit
from core.audit.history import (
    AUDITS,
    LOCAL_OWNER,
    SCHEMA_VERSION,
    VERSION,
    AuditStore,
    Author,
    HistoryError,
    code_version,
    model_fingerprint,
    new_owner_key,
    rerun_arguments,
)
from core.intake.workspace import build_workspace
from core.model.guarantee import guarantee_line
from core.schema import Schema

ISSUER = "https://login.example.org"
ALICE = Author(ISSUER, "alice-0001", "Alice Martin")
BOB = Author(ISSUER, "bob-0002", "Bob Stone")
CONSTRAINT = "delta(debt_ratio) >= -0.2"


new_history = pgcluster.new_history    # the fixture: each test taking it runs on SQLite and PostgreSQL
pg_cluster = pgcluster.pg_cluster      # the fixture new_history takes for PostgreSQL (one per session)


@pytest.fixture(scope="module")
def credit():
    return demo_credit()


@pytest.fixture(scope="module")
def audit(credit):
    """A small audit of the credit demo (every recourse proven optimal: run again, the same)."""
    _, _, model, ens, X, schema = credit
    return run_audit(ens, X, schema=schema, target=1, max_rows=60, n_jobs=1, model=model, n_perm=200, n_boot=100,
                     local_rules_per_group=1, tcrex=False)


@pytest.fixture(scope="module")
def constrained(credit):
    """An audit whose schema carries a constraint (5 rows, 1 s each: a constrained recourse
    costs seconds where a free one costs milliseconds)."""
    _, _, model, ens, X, schema = credit
    return run_audit(ens, X, schema=schema.with_constraints(CONSTRAINT), target=1, max_rows=5, time_limit=1.0,
                     n_jobs=1, model=model, n_perm=200, n_boot=100, local_rules_per_group=0, tcrex=False, scan=False)


def test_an_audit_keeps_its_trail(constrained, new_history):
    audit, url = constrained, new_history()
    i = AuditStore(url).save(audit, owner=ALICE, title="credit v1")
    store = AuditStore(url)                                  # as after a restart
    trail = store.trail(owner=ALICE)
    assert len(trail) == 1
    row = trail.iloc[0]
    assert (row["id"], row["author"], row["author_issuer"], row["author_subject"]) == (
        i, "Alice Martin", ISSUER, "alice-0001")
    assert row["created"].endswith("UTC") and not row["shared"]
    assert row["data_sha256"] == audit.meta["data"]["sha256"][:64]
    assert row["model_sha256"] == str(audit.meta["model"]["sha256"] or "")
    settings = json.loads(row["settings"])
    assert settings["constraints"] == [CONSTRAINT]
    assert {k: settings[k] for k in ("max_rows", "n_perm", "n_boot", "random_state", "target")} == {
        k: json.loads(json.dumps(audit.params[k])) for k in ("max_rows", "n_perm", "n_boot", "random_state", "target")}
    assert row["package_version"] == metadata.version("counterfactual-atlas")
    assert row["git_commit"] == (code_version()[1] or "unknown") and code_version()[1] in _expected_commits()
    assert row["guarantee"] == audit.guarantee.kind == "estimated"
    assert row["guarantee_text"] == guarantee_line(audit.guarantee).split(": ", 1)[1]
    with store.engine.connect() as con:                       # issuer and subject stored as such
        stored = con.execute(sa.select(AUDITS.c.author_issuer, AUDITS.c.author_subject)).one()
    assert tuple(stored) == (ISSUER, "alice-0001")


def _expected_commits() -> set[str]:
    """The commit an audit should record here: the deployment's ATLAS_GIT_COMMIT, else the
    checkout's HEAD (``-dirty`` with uncommitted changes), else unknown ("")."""
    if os.environ.get("ATLAS_GIT_COMMIT", "").strip():
        return {os.environ["ATLAS_GIT_COMMIT"].strip()[:60]}
    head = subprocess.run(["git", "-c", f"safe.directory={ROOT}", "-C", str(ROOT), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip() if (ROOT / ".git").exists() else ""
    return {head, head + "-dirty"} if head else {""}


def test_private_until_shared_read_only_for_the_team(audit, new_history):
    store = AuditStore(new_history())
    a = store.save(audit, owner=ALICE, title="alice's draft")
    b = store.save(audit, owner=ALICE, title="alice's finished audit")
    mine = store.save(audit, owner=BOB, title="bob's own")
    assert list(store.list(owner=BOB)["id"]) == [mine] and store.trail(owner=BOB)["id"].tolist() == [mine]
    for i in (a, b):
        with pytest.raises(HistoryError, match="private to its author: nothing of it is shown"):
            store.load(i, owner=BOB)
    with pytest.raises(HistoryError, match="no audit 999"):
        store.load(999, owner=BOB)
    assert store.share(b, owner=ALICE)
    seen = store.list(owner=BOB)
    assert list(seen["id"]) == [mine, b]
    assert seen.set_index("id").loc[b, ["author", "shared", "mine"]].tolist() == ["Alice Martin", True, False]
    assert store.load(b, owner=BOB).to_dict() == store.load(b, owner=ALICE).to_dict()
    # read-only: bob can neither delete it nor make it private; a twin from another provider is not alice
    assert not store.delete(b, owner=BOB) and not store.share(b, owner=BOB, shared=False)
    twin = Author("https://other.example.org", "alice-0001", "Alice Martin")
    assert list(store.list(owner=twin)["id"]) == [b]
    with pytest.raises(HistoryError, match="private"):
        store.load(a, owner=twin)
    # nobody signed in (a local instance, a public visitor) never sees what the team shares
    assert store.list(owner=LOCAL_OWNER).empty and store.list(owner=new_owner_key()).empty
    with pytest.raises(HistoryError, match="needs a signed-in user"):
        store.share(b, owner=LOCAL_OWNER)
    assert store.share(b, owner=ALICE, shared=False)
    with pytest.raises(HistoryError, match="private to its author"):
        store.load(b, owner=BOB)
    assert store.delete(a, owner=ALICE) and list(store.list(owner=ALICE)["id"]) == [b]


def test_links_and_settings_belong_to_their_author(credit, new_history):
    df, target, model, _, _, schema = credit
    ws = build_workspace(df, target, model, name="credit", protected=["sex"])
    store = AuditStore(new_history())
    token = store.save_workspace(ws, owner=ALICE)
    with pytest.raises(HistoryError, match="private to the colleague who kept them: nothing of them is shown"):
        store.load_workspace(token, owner=BOB)
    assert store.workspace_owner(token, owner=ALICE) == (True, False)
    assert store.load_workspace(token, owner=ALICE).data_sha256 == ws.data_sha256
    assert not store.share_workspace(token, owner=BOB) and store.share_workspace(token, owner=ALICE)
    assert store.load_workspace(token, owner=BOB).data_sha256 == ws.data_sha256
    assert store.workspace_owner(token, owner=BOB) == (False, True)
    open_link = store.save_workspace(ws, owner=LOCAL_OWNER)        # no sign-in: the link is the permission
    assert store.load_workspace(open_link, owner=BOB).data_sha256 == ws.data_sha256

    kept = schema.with_constraints(CONSTRAINT)
    s = store.save_settings(kept, name="credit, debt may fall 0.2 at most", owner=ALICE)
    assert store.list_settings(owner=BOB).empty
    with pytest.raises(HistoryError, match="private to its author"):
        store.load_settings(s, owner=BOB)
    assert store.share_settings(s, owner=ALICE)
    listed = store.list_settings(owner=BOB)
    assert listed[["author", "shared", "mine", "columns", "constraints"]].values.tolist() == [
        ["Alice Martin", True, False, len(kept.names), 1]]
    assert store.load_settings(s, owner=BOB) == kept
    assert not store.delete_settings(s, owner=BOB) and store.delete_settings(s, owner=ALICE)
    with pytest.raises(HistoryError, match="Give the settings a name"):
        store.save_settings(kept, name="  ", owner=ALICE)


def _writer(url, payload, n, start, out) -> None:
    start.wait(60)
    try:
        store = AuditStore(url)                   # every process opens the new database at once
        out.put([store.save(Audit.from_dict(payload), owner=Author(ISSUER, f"w{i}")) for i in range(n)])
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails
        out.put(repr(exc))


def test_six_processes_writing_at_once_lose_nothing(audit, new_history):
    """Six server processes open a database nobody has opened (each creates or finds the
    tables) and store audits at the same moment: every audit lands, once."""
    url, n = new_history(), 4
    ctx = mp.get_context("fork")                  # forked: no child imports the project again
    start, out = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, audit.to_dict(), n, start, out)) for _ in range(6)]
    for p in procs:
        p.start()
    got = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    assert all(isinstance(g, list) for g in got), got
    ids = [i for g in got for i in g]
    assert len(ids) == len(set(ids)) == 6 * n
    store = AuditStore(url)
    with store.engine.connect() as con:
        assert con.execute(sa.select(sa.func.count()).select_from(AUDITS)).scalar() == 6 * n
        assert con.execute(sa.select(VERSION.c.version)).scalars().all() == [SCHEMA_VERSION]


_OLD = sa.MetaData()
#: the history's only table as the first version wrote it (no elapsed time, no owner of links,
#: no trail, no version): what an analyst's ~/.counterfactual-atlas/history.sqlite may still hold
_OLD_AUDITS = sa.Table(
    "atlas_audits", _OLD,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("owner", sa.String(64), nullable=False, index=True),
    *[sa.Column(c, sa.String(n), nullable=False) for c, n in (("created", 32), ("title", 300), ("data_name", 300),
                                                              ("data_sha256", 64), ("model_sha256", 64),
                                                              ("model_source", 100), ("target", 200))],
    sa.Column("protected", sa.Text, nullable=False),
    sa.Column("n_rows", sa.Integer, nullable=False),
    sa.Column("n_significant", sa.Integer, nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("audit", sa.LargeBinary, nullable=False),
)


def test_an_old_history_opens_upgraded_and_keeps_every_audit(constrained, new_history):
    audit, url = constrained, new_history()
    engine = sa.create_engine(url)
    _OLD.create_all(engine)
    with engine.begin() as con:
        con.execute(_OLD_AUDITS.insert().values(
            owner=LOCAL_OWNER, created="2026-01-05 10:00:00 UTC", title="from the first version",
            data_name="credit", data_sha256="d" * 64, model_sha256="m" * 64, model_source="lightgbm", target="1",
            protected='["sex"]', n_rows=len(audit.rows), n_significant=0, summary='["A finding."]',
            audit=zlib.compress(audit.to_json().encode())))
    engine.dispose()
    store = AuditStore(url)
    assert store.upgraded_from == 1
    listed = store.list()
    assert listed["title"].tolist() == ["from the first version"] and pd.isna(listed["elapsed"][0])
    assert store.load(int(listed["id"][0])).to_dict() == Audit.from_dict(audit.to_dict()).to_dict()
    row = store.trail().iloc[0]                   # the trail is filled from the audit the row holds
    assert json.loads(row["settings"])["constraints"] == [CONSTRAINT]
    assert row["guarantee"] == "estimated" and row["package_version"] == "not recorded"
    assert row["git_commit"] == "not recorded"
    new = store.save(audit, owner=ALICE)
    assert store.list(owner=ALICE)["id"].tolist() == [new]
    again = AuditStore(url)
    assert again.upgraded_from is None and len(again.list()) == 1
    with again.engine.connect() as con:
        assert con.execute(sa.select(VERSION.c.version)).scalar() == SCHEMA_VERSION


def test_a_newer_history_is_refused_and_left_untouched(audit, new_history):
    url = new_history()
    store = AuditStore(url)
    store.save(audit)
    with store.engine.begin() as con:
        con.execute(VERSION.update().values(version=SCHEMA_VERSION + 7))
    with pytest.raises(HistoryError, match=f"newer version .* version {SCHEMA_VERSION + 7}; this version reads up "
                                           f"to {SCHEMA_VERSION}.*nothing in it was changed"):
        AuditStore(url)
    with store.engine.connect() as con:
        assert con.execute(sa.select(VERSION.c.version)).scalar() == SCHEMA_VERSION + 7
        assert con.execute(sa.select(sa.func.count()).select_from(AUDITS)).scalar() == 1


def test_a_database_that_cannot_be_reached_says_so(audit, pg_cluster):
    """No server at the address: a message naming the database, never its password, within
    seconds. A database that goes away while open: every call says so."""
    url = "postgresql+psycopg://atlas:s3cret@127.0.0.1:9/atlas"        # port 9 (discard): nothing listens
    t0 = time.monotonic()
    with pytest.raises(HistoryError, match="cannot be opened") as err:
        AuditStore(url)
    assert time.monotonic() - t0 < 15
    assert "s3cret" not in str(err.value) and "127.0.0.1:9/atlas" in str(err.value)
    assert "ATLAS_HISTORY_URL" in str(err.value)

    url = new_database("going_away")
    store = AuditStore(url)
    i = store.save(audit, owner=ALICE)
    pg_cluster.sql('DROP DATABASE "going_away" WITH (FORCE)')
    for call, said in ((lambda: store.list(owner=ALICE), "could not list the audits"),
                       (lambda: store.load(i, owner=ALICE), "could not read the audit"),
                       (lambda: store.trail(owner=ALICE), "could not read the audit trail"),
                       (lambda: store.save(audit, owner=ALICE), "could not be stored in the history")):
        with pytest.raises(HistoryError, match=said):
            call()


def test_an_audit_run_again_from_its_record_gives_the_same_figures(credit, audit, pg_cluster):
    """Re-opened from the history, with the model kept beside it and the same data, the
    audit's recorded settings give the same rows, groups, tests and findings. The demo's model
    came from no file: its fingerprint is that of its arrays, the same once kept and read back."""
    _, _, model, ens, X, _ = credit
    url = new_database("rerun")
    i = AuditStore(url).save(audit, owner=ALICE, ensemble=ens)
    store = AuditStore(url)
    back, kept = store.load(i, owner=ALICE), store.load_model(i, owner=ALICE)
    assert store.trail(owner=ALICE)["model_sha256"].tolist() == [model_fingerprint(ens)] == [model_fingerprint(kept)]
    args = rerun_arguments(back, kept)
    assert args["schema"] == Schema.from_dict(audit.meta["schema"]) and args["target"] == 1
    again = Audit.from_dict(run_audit(kept, X, model=model, n_jobs=1, **args).to_dict())    # as stored
    assert again.meta["data"]["sha256"] == back.meta["data"]["sha256"]
    pd.testing.assert_frame_equal(again.groups.reset_index(drop=True), back.groups.reset_index(drop=True),
                                  check_dtype=False)
    pd.testing.assert_frame_equal(again.tests.reset_index(drop=True), back.tests.reset_index(drop=True),
                                  check_dtype=False)
    assert again.rows["row"].tolist() == back.rows["row"].tolist()
    assert again.rows["cost"].round(9).tolist() == back.rows["cost"].round(9).tolist()
    assert again.summary == back.summary
    with pytest.raises(HistoryError, match="not a class of this model"):
        rerun_arguments(back, type("Regressor", (), {"classes": None})())
