"""AppTest of the Audit history page: finished audits are stored, listed,
re-opened in the Fairness audit page and compared; a public instance keeps
each visitor's audits private."""

from __future__ import annotations

from dashboard import deploy


def _audit(at, rows):
    at.number_input(key="fa_rows").set_value(rows)
    at.number_input(key="fa_perm").set_value(300)
    at.number_input(key="fa_boot").set_value(100)
    at.number_input(key="fa_local").set_value(1)
    at.button(key="fa_go").click().run()
    assert not at.exception, at.exception


def test_audits_are_stored_reopened_and_compared(page_app, fresh_history):
    at = page_app("fairness_audit.py")
    _audit(at, 40)
    _audit(at, 60)
    took = at.session_state["fa_result"]["audit"].elapsed
    at.switch_page("../pages/history.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["rows"]) == [60, 40]                       # newest first
    assert table["took (s)"].iloc[0] == took > 0 and table["took (s)"].iloc[1] > 0   # each audit's own time
    ids = list(table["id"])
    at.selectbox(key="hi_open_id").set_value(ids[1])
    at.button(key="hi_open").click().run()
    assert at.session_state["fa_result"]["audit"].rows.shape[0] == 40
    at.selectbox(key="hi_before").set_value(ids[1])
    at.selectbox(key="hi_after").set_value(ids[0])
    at.run()
    diff = at.dataframe[-1].value
    assert {"change", "gap_before", "gap_after"} <= set(diff.columns) and len(diff)
    assert any(m.label == "Gaps closed" for m in at.metric)
    at.switch_page("../pages/fairness_audit.py").run()
    assert {m.label: m.value for m in at.metric}["Rows audited"] == "40"   # the re-opened audit is shown


def test_public_visitors_see_only_their_own_audits(page_app, fresh_history, monkeypatch):
    monkeypatch.setenv("ATLAS_PUBLIC", "1")
    deploy.settings.cache_clear()
    first = page_app("fairness_audit.py")
    _audit(first, 40)
    first.switch_page("../pages/history.py").run()
    assert len(first.dataframe[0].value) == 1
    other = page_app("history.py")
    assert not other.exception
    assert any("No audit has been stored yet" in i.value for i in other.info)


def test_public_visitor_cannot_use_the_local_key(page_app, fresh_history, monkeypatch):
    """Audits of a local instance writing to the same database stay out of reach
    of a public visitor who types `local` as their key; a malformed key is
    refused with a message and the visitor keeps their own key."""
    local = page_app("fairness_audit.py")
    _audit(local, 40)                                  # stored under `local`
    monkeypatch.setenv("ATLAS_PUBLIC", "1")
    deploy.settings.cache_clear()
    at = page_app("history.py")
    assert "history_owner" in at.session_state          # the page gave this visitor a key of their own
    own = at.session_state["history_owner"]
    for typed in ("local", "not a key"):
        at.text_input(key="hi_key_in").set_value(typed).run()
        at.button(key="hi_key_use").click().run()
        assert not at.exception
        assert any("not a history key" in e.value for e in at.error)
        assert any("No audit has been stored yet" in i.value for i in at.info)
        assert not at.dataframe
    assert at.session_state["history_owner"] == own


def test_two_audits_with_other_reference_groups_say_so(page_app, fresh_history):
    """Gaps measured against other reference groups are not compared: the page counts those no
    longer tested beside the newly tested, and says which attribute's references differ."""
    from core.audit import run_audit
    from dashboard.caching import demo_workspace
    from dashboard.history import store

    ws = demo_workspace("credit-lightgbm")
    kw = dict(schema=ws.schema, target=1, protected=["employment"], max_rows=60, n_jobs=1, n_perm=50, n_boot=20,
              tcrex=False, local_rules_per_group=0, scan=False)
    first = run_audit(ws.ensemble, ws.X, **kw)
    other = next(g for g in first.groups["group"] if g != first.references["employment"])
    second = run_audit(ws.ensemble, ws.X, reference={"employment": other}, **kw)
    ids = [store().save(first), store().save(second)]
    at = page_app("history.py")
    at.selectbox(key="hi_before").set_value(ids[0])
    at.selectbox(key="hi_after").set_value(ids[1])
    at.run()
    assert not at.exception, at.exception
    metrics = {m.label: int(m.value) for m in at.metric}
    assert metrics["Newly tested"] >= 1 and metrics["No longer tested"] >= 1
    said = [c.value for c in at.caption if "different reference groups" in c.value]
    expected = f"employment against {first.references['employment']} in the first, {other} in the second"
    assert said and expected in said[0], said
