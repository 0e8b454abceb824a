"""Case story: one row walked through its decision, its smallest change, its rule,
its region and its group, in plain language; exported as one HTML file."""

from __future__ import annotations

import streamlit as st

from core.audit.story import case_story
from core.rules import CounterfactualRules
from dashboard import state
from dashboard.caching import session_cached
from dashboard.share import kept
from dashboard.ui import download, plain, plain_bold, show_constraints, show_guarantee, user_errors
from dashboard.widgets import row_picker, share_row, target_picker

K = state.Keys
CAPTION = ("One case told from start to end for a presentation: the model's decision, the region around it where "
           "the answer cannot change, the smallest change that gives the outcome you choose (with what it "
           "guarantees), a rule for cases like it, and how its group fares in the fairness audit of this page's "
           "data.")


def _tell(ws, schema, names, X, pred, row, target, limit, with_rule, audit) -> None:
    with user_errors("The story could not be told"), st.spinner("Finding the smallest change and the rule…"):
        rules = None
        if with_rule:
            groups = list(schema.groups().values())
            rules = session_cached("cs_surrogate", ws.key, lambda: CounterfactualRules(
                groups=groups, random_state=0, max_rows=8000).fit(X, pred, feature_names=names))
        state.put(K.STORY_RESULT, (row, str(target), case_story(ws, row, target, time_limit=float(limit),
                                                                rules=rules, audit=audit)))


def _show(ws, ens, names, row, target, got) -> None:
    """The story last told, its sections, its table and its download."""
    g_row, g_target, story = got
    if (g_row, g_target) != (row, str(target)):
        st.caption("This story is for an earlier choice of case or outcome; press the button to tell the current one.")
    st.subheader(plain(story.title))
    quoted = [*names, *(c.name for c in ws.columns), *(v for c in ws.columns for v in (c.categories or ())),
              *(ws.outcome_text(c) for c in (ens.classes if ens.is_classifier else ()))]
    st.markdown("**In brief**")
    st.markdown("\n".join(f"- {plain_bold(s, quoted)}" for s in story.summary))
    show_guarantee(st, story.guarantee, "this story")
    for head, paras in story.sections:
        st.markdown(f"#### {plain(head)}")
        for p in paras:
            st.markdown(plain_bold(p, quoted))
    st.markdown("#### The case and its counterfactual")
    st.dataframe(story.shown_table(), key="cs_table")
    download(st, "Download the story (HTML)", story.to_html, f"case-{story.row}.html", "text/html",
             key="cs_download", source=story)


def _precluded_cases(audit) -> None:
    """The cases the audit found precluded (no action under the constraints helps), one of
    which the analyst may open here: it becomes the row every page explains."""
    rows = audit.rows if audit is not None else None
    if rows is None or "precluded" not in rows or not (rows["precluded"] == 1).any():
        return
    cases = rows.loc[rows["precluded"] == 1, "row"].astype(int).tolist()

    def pick() -> None:
        if st.session_state.get("cs_precluded") is not None:
            share_row(int(st.session_state["cs_precluded"]))
    st.selectbox(f"Open a case the audit found precluded ({len(cases):,}: no action under the constraints between "
                 "features gets the favourable outcome)", cases, index=None, placeholder="Choose a precluded case",
                 key="cs_precluded", on_change=pick)


def main() -> None:
    ws, ens, schema, names, X, pred = state.page_context("Case story", CAPTION)
    audit = state.audit_of(ws)
    _precluded_cases(audit)
    c1, c2, c3 = st.columns([1, 2, 1])
    row = row_picker(c1, len(X), "cs_row")
    target = target_picker(c2, ens, pred, pred[row], "cs")
    limit = c3.number_input("Time limit (s)", 1.0, 600.0, kept("cs_limit", 30.0), key="cs_limit")
    with_rule = st.checkbox("Include a counterfactual rule (fits a surrogate forest once)", value=kept("cs_rule", True),
                            key="cs_rule")
    show_constraints(st, schema)
    st.caption("The fairness audit of this data is included." if audit is not None else
               "No fairness audit of this data in this session: run one on the Fairness audit page to include how "
               "the case's group fares.")
    if st.button("Tell the story", type="primary", key="cs_go"):
        _tell(ws, schema, names, X, pred, row, target, limit, with_rule, audit)
    got = state.get(K.STORY_RESULT)
    if got is not None:
        _show(ws, ens, names, row, target, got)


main()
