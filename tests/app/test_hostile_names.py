"""Text from a file is shown as text on every page (#37): an upload whose column
names, category values, class labels and file names hold Markdown, HTML, LaTeX,
emoji and colour directives and bare addresses is walked through every page in
``pages/`` (each page's actions run, so results, charts and trees are drawn),
and every text of the element tree that holds one of them is read as the
browser would read it: Markdown (labels, options, messages, metric values,
tabs, expanders, help), plain text (selectbox and multiselect options, JSON),
Plotly's HTML-like text (titles, axes, ticks, hovers) or a Graphviz label. Each
hostile name must show exactly as written, with nothing of it rendered. The
demo is walked the same way: its pages show no escape a reader would see."""

from __future__ import annotations

import html
import json
import re

import hostile as h
import numpy as np
import pytest
from conftest import ROOT
from google.protobuf.message import Message
from streamlit.testing.v1 import AppTest

PAGES = sorted(p.name for p in (ROOT / "pages").glob("*.py"))

# Where each text of the element tree is shown, by element type and proto field
# (a marker found in a text not classified here fails the test: classify it).
MARKDOWN_BODY = {"markdown", "caption", "title", "header", "subheader", "success", "info", "warning", "error",
                 "toast", "metric"}
LABEL_OPTIONS = {"radio", "select_slider", "slider", "button_group"}   # options shown as Markdown labels
PLAIN_OPTIONS = {"selectbox", "multiselect"}                          # options shown as text
IDS = {"id", "form_id", "key", "formId"}


def _strings(msg: Message, path: str = ""):
    for f, v in msg.ListFields():
        for x in (v if f.is_repeated else [v]):
            if isinstance(x, Message):
                yield from _strings(x, f"{path}.{f.name}")
            elif isinstance(x, str):
                yield f"{path}.{f.name}".lstrip("."), x


def texts(at) -> list[tuple[str, str, str]]:
    """Every text of the tree holding a hostile marker: (element type, proto field, text)."""
    out = []

    def walk(node):
        proto = getattr(node, "proto", None)
        if isinstance(proto, Message):
            kind = getattr(node, "type", type(node).__name__)
            for path, s in _strings(proto):
                if h.MARKER.search(s):
                    out.append((kind, path, s))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out


def _plotly_strings(spec: str):
    def walk(v, path):
        if isinstance(v, dict):
            for k, x in v.items():
                yield from walk(x, f"{path}.{k}")
        elif isinstance(v, list):
            for x in v:
                yield from walk(x, path)
        elif isinstance(v, str):
            yield path, v
    yield from walk(json.loads(spec), "")


_TAG = re.compile(r"</?[A-Za-z][^>]*>")


def plotly_leaks(text: str, path: str) -> list[str]:
    """Plotly reads <b>, <a href>, <br>, … and entities in every text it draws; a
    hover template also reads %{…}. The name must survive both."""
    if path.endswith("template") and "%{" in h.MARKER.sub("", text):
        names = [n for n in h.NAMES if "%{" in n and n in text]
        if names:
            return [f"{names[0]!r} is read as a template in {text!r}"]
    shown = html.unescape(_TAG.sub("\x00", text))
    return [f"{h.BY_MARKER[m]!r} is not shown as written in Plotly text {text!r}"
            for m in set(h.MARKER.findall(text)) if h.BY_MARKER[m] not in shown]


def graphviz_leaks(dot: str) -> list[str]:
    """The labels as Graphviz draws them: DOT escapes resolved, then the entities
    the SVG passes on to the browser."""
    out = []
    for label in re.findall(r'label="((?:[^"\\]|\\.)*)"', dot):
        raw = re.sub(r"\\([nlr])", "\n", label)
        raw = re.sub(r"\\(.)", r"\1", raw)
        shown = html.unescape(raw)
        out += [f"{h.BY_MARKER[m]!r} is not drawn as written in {label!r}"
                for m in set(h.MARKER.findall(label)) if h.BY_MARKER[m] not in shown]
    return out


def plain_leaks(text: str) -> list[str]:
    return [f"{h.BY_MARKER[m]!r} is not shown as written in {text!r}"
            for m in set(h.MARKER.findall(text)) if h.BY_MARKER[m] not in text]


def check(at, page: str) -> list[str]:
    """What on the page shows a hostile name otherwise than as written."""
    problems = []
    for kind, path, s in texts(at):
        field = path.rsplit(".", 1)[-1]
        if field in IDS:
            continue
        if kind == "plotly_chart" and field == "spec":
            for p, t in _plotly_strings(s):
                if h.MARKER.search(t):
                    problems += plotly_leaks(t, p)
        elif kind == "graphviz_chart" and field == "spec":
            problems += graphviz_leaks(s)
        elif field in ("label", "help") or (kind in LABEL_OPTIONS and field == "options"):
            problems += h.leaks(s, label=field != "help")
        elif kind in MARKDOWN_BODY and field in ("body", "delta"):
            problems += h.leaks(s)
        elif kind in PLAIN_OPTIONS and field in ("options", "default", "raw_value", "raw_values", "placeholder"):
            problems += plain_leaks(s)
        elif kind in ("json", "code", "text", "text_input") and field in ("body", "code_text", "default", "value",
                                                                          "placeholder"):
            problems += plain_leaks(s)
        else:
            problems.append(f"unclassified text ({kind}.{path}): {s[:80]!r}")
    return [f"{page}: {p}" for p in dict.fromkeys(problems)]


def _click(at, label: str):
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception


def _upload(at):
    df = h.table()
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload(h.DATA_FILE, h.csv_bytes(df), "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value(h.TARGET).run()
    at.file_uploader(key="dm_model_file").upload(h.MODEL_FILE, h.model_file(df), "application/octet-stream")
    at.run()
    at.button(key="dm_load").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = at.session_state["workspace"]
    assert list(ws.ensemble.classes) == sorted(h.CLASSES) and h.DATA_FILE in ws.name
    at.text_input(key="dm_class_1").input(h.CLASS_NAME)
    _click(at, "Apply class names")
    ws = at.session_state["workspace"]
    assert ws.class_names == {h.CLASSES[1]: h.CLASS_NAME}
    return ws


def _actions(at, page: str, ws, problems: list[str]) -> None:
    """Run the page's own computations, small, so that results, charts and trees are drawn
    (what a page shows before its last action is checked into ``problems``)."""
    refused = int(np.flatnonzero(ws.predictions == ws.ensemble.classes[0])[0])
    if page == "optimal_cf.py":
        at.number_input(key="ocf_row").set_value(refused).run()
        _click(at, "Find the optimal counterfactual")
        assert at.session_state["ocf_result"].found
        at.number_input(key="ocb_n").set_value(3).run()
        _click(at, "Run on 3 rows")
    elif page == "counterfactual_rules.py":
        at.number_input(key="cr_row").set_value(refused).run()
        at.button(key="cr_go").click().run()
        at.button(key="cr_reg_go").click().run()
    elif page == "decision_regions.py":
        at.radio(key="dr_mode").set_value("projection").run()
    elif page == "fcca.py":
        at.number_input(key="fcca_max").set_value(30)
        at.number_input(key="fcca_jobs").set_value(1)
        _click(at, "Compute counterfactuals and thresholds")
        assert at.session_state["fcca_run"]["result"].thresholds is not None
    elif page == "case_story.py":
        at.number_input(key="cs_row").set_value(refused).run()
        at.button(key="cs_go").click().run()
    elif page == "fairness_audit.py":
        at.multiselect(key="fa_protected").set_value([h.SEX, h.JOB])
        at.number_input(key="fa_perm").set_value(200)
        at.number_input(key="fa_boot").set_value(100)
        at.number_input(key="fa_local").set_value(2)
        at.number_input(key="fa_jobs").set_value(1)
        for rows in (25, 30):                            # two audits in the history, to compare there
            at.number_input(key="fa_rows").set_value(rows).run()
            at.button(key="fa_go").click().run()
            assert not at.exception and len(at.session_state["fa_result"]["audit"].rows) == rows
        problems += check(at, page)
        saved = at.session_state["fa_result"]["audit"].to_json()        # and re-opened from its file
        at.file_uploader(key="fa_upload").upload(h.AUDIT_FILE, saved.encode(), "application/json")
        at.run()
        at.button(key="fa_open").click().run()
        assert at.session_state["fa_result"]["source"] == h.AUDIT_FILE
    elif page == "compare_models.py":
        df = h.table(seed=1)
        at.radio(key="cm_source").set_value("Upload a model file").run()
        at.file_uploader(key="cm_model_file").upload(h.MODEL_FILE, h.model_file(df), "application/octet-stream")
        at.run()
        at.button(key="cm_load_file").click().run()
        assert not at.error, [e.value for e in at.error]
        at.multiselect(key="cm_protected").set_value([h.SEX]).run()
        at.number_input(key="cm_rows").set_value(10)
        at.number_input(key="cm_jobs").set_value(1).run()
        at.button(key="cm_go").click().run()
        at.button(key="cm_audit_go").click().run()
        assert at.session_state["cm_audits"] is not None
    elif page == "history.py":
        assert len(at.selectbox(key="hi_open_id").options) >= 2
        at.button(key="hi_open").click().run()
    assert not at.exception, (page, at.exception)


@pytest.mark.slow
def test_every_page_shows_hostile_names_as_written():
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=600)
    at.run()
    ws = _upload(at)
    problems = check(at, "data_model.py")
    seen = set()
    for page in [p for p in PAGES if p != "history.py"] + ["history.py"]:     # the history after the audit
        at.switch_page(f"../pages/{page}").run()
        assert not at.exception, (page, at.exception)
        _actions(at, page, at.session_state["workspace"], problems)
        problems += check(at, page)
        seen |= {m for _, _, s in texts(at) for m in h.MARKER.findall(s)}
    assert not problems, "\n".join(problems)
    assert seen == set(h.BY_MARKER), f"never shown: {sorted(set(h.BY_MARKER) - seen)}"
    assert ws.name


def _all_texts(at):
    """Every text of the tree: (element type, proto field, text)."""
    out = []

    def walk(node):
        proto = getattr(node, "proto", None)
        if isinstance(proto, Message):
            kind = getattr(node, "type", type(node).__name__)
            out.extend((kind, path, s) for path, s in _strings(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out


def test_the_demo_shows_no_escape_a_reader_would_see():
    """The escaping leaves ordinary text alone: on the demo, no page shows a backslash
    where its Markdown has none to show, and no selectbox or multiselect option holds one."""
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=300)
    at.run()
    seen = 0
    for page in PAGES:
        at.switch_page(f"../pages/{page}").run()
        assert not at.exception, (page, at.exception)
        for kind, path, s in _all_texts(at):
            field = path.rsplit(".", 1)[-1]
            if field in ("label", "help", "body") and (kind in MARKDOWN_BODY or field != "body"):
                shown = h.live(s, label=field == "label").text
                assert "\\" not in shown, (page, kind, s, shown)
                seen += 1
            elif kind in PLAIN_OPTIONS and field == "options":
                assert "\\" not in s, (page, s)
    assert seen > 100
