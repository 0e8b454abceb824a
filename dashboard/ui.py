"""Small page helpers: user-facing errors without tracebacks, user text shown as text."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import streamlit as st

from core import dot
from core.model.guarantee import guarantee_line
from dashboard import state
from dashboard.deploy import settings

log = logging.getLogger("atlas")

# What turns text into something else in Streamlit's Markdown (st.markdown, captions,
# alerts, and the labels of widgets, metrics, tabs and expanders, radio and
# select-slider options, metric values and help texts), escaped with a backslash
# so that a file name, column, category, class or URL parameter shows as written:
# links and images ("](", reference definitions), colour and icon directives
# (":red[", ":small"), emphasis, code and strikethrough marks, LaTeX ("$"), HTML
# tags, autolinks and entities ("<a", "</", "<!", "&lt;"), and block marks at a
# line's start (headings, quotes, lists, tables). Text without these is left as
# it is.
_MARKDOWN = re.compile(
    r"[\\`*$~|]"                              # escapes, code, emphasis, LaTeX, strikethrough, tables
    r"|(?<=\])\("                              # [text](address), ![alt](address)
    r"|(?<=[\w/-])\[|^[ \t]*\["                  # :directive[...], a reference definition [x]: ...
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"      # emphasis with _ (not inside a word: snake_case stays)
    r"|<(?=[A-Za-z/!?])"                        # HTML and <autolinks>
    r"|&(?=#?[A-Za-z0-9]+;)"                    # entities (&lt; would show as <)
    r"|:(?=[A-Za-z])"                           # directives: :red[...], :small, :blue-background[...]
    r"|(?<=:material)/"                         # :material/icon: (Streamlit rewrites it before parsing)
    r"|^[ \t]*(?:[#>+=-]|\d+[.)])",               # headings, quotes, lists, setext lines
    re.MULTILINE)
# Runs no backslash can keep as written, shown as inline code instead: Streamlit's
# GitHub-flavoured Markdown links any bare address or e-mail, escaped or not, and
# reads emoji shortcodes (":smile:", ":+1:"), ":material_icon:" and ":streamlit:"
# in the text after escapes are resolved.
_ADDRESS = re.compile(r"(?i)(?:[a-z][a-z0-9+.-]*://|www\.)\S+?(?=[).,;:!?'\"]*(?:\s|$))"   # trailing punctuation
                      r"|[^\s@]+@[^\s@]+\.[^\s@]+"                                             # is not part of it
                      r"|:(?:[\w+-]*[A-Za-z][\w+-]*|\+1|-1|100|1234):(?!//)")


def _escape(text: str) -> str:
    return _MARKDOWN.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1], text)


def _code(run: str) -> str:
    """``run`` as inline code; a ":material/" in it (which Streamlit rewrites even in
    code) is left out of the code span and escaped."""
    if ":material/" in run:
        return _escape(":material/").join(_code(p) if p else "" for p in run.split(":material/"))
    fence = "`" * (max((len(m) for m in re.findall("`+", run)), default=0) + 1)
    return f"{fence} {run} {fence}" if run.startswith("`") or run.endswith("`") else f"{fence}{run}{fence}"


def plain(text: object) -> str:
    """``text`` for a Streamlit element that renders Markdown, shown exactly as
    written: no link, image, HTML, LaTeX, emphasis, emoji, icon or colour directive
    it holds is rendered (see ``_MARKDOWN`` and ``_ADDRESS``); text free of them is
    returned unchanged. The one helper for every label, option, value and message
    that holds text from a file or a link; never for the options of a selectbox or
    a multiselect, which Streamlit shows as text (and would show the backslashes)."""
    out, at, text = [], 0, str(text)
    runs: list[list[int]] = []
    for m in _ADDRESS.finditer(text):
        if runs and runs[-1][1] == m.start():          # adjacent runs: one code span (two would merge badly)
            runs[-1][1] = m.end()
        else:
            runs.append([m.start(), m.end()])
    for start, end in runs:
        out += [_escape(text[at:start]), _code(text[start:end])]
        at = end
    out.append(_escape(text[at:]))
    return "".join(out).replace("\n", "  \n")


def plain_bold(text: object, literal: Any = ()) -> str:
    """:func:`plain` for text whose only Markdown is ``**bold**`` (the case
    story's): the bold survives, anything inside it or around it is shown as
    written. ``literal``: texts the story may quote (column names, categories,
    class names) that hold ``*`` themselves; each is shown as written, its stars
    never taken for the story's bold."""
    text = str(text)
    quoted = sorted({str(q) for q in literal if "*" in str(q) and str(q) in text}, key=len, reverse=True)
    held: list[str] = []
    if quoted:
        pattern = re.compile("|".join(re.escape(q) for q in quoted))

        def hold(m: re.Match) -> str:
            held.append(m.group())
            return f"\x00{len(held) - 1}\x00"
        text = pattern.sub(hold, text)
    parts = text.split("**")
    out = plain(text) if len(parts) % 2 == 0 else "**".join(plain(p) for p in parts)   # odd markers: no bold
    return re.sub("\x00(\\d+)\x00", lambda m: plain(held[int(m.group(1))]), out)


@contextmanager
def user_errors(title: str) -> Iterator[None]:
    """Show a failure inside the block as a message on the page, never a traceback.

    ``ValueError`` (the library's user-facing errors) is shown as is; any other
    exception is shown with its type and logged with its traceback for the
    operator. The block's partial effects should be assigned to session state
    only at its end, so a failure keeps what the user already had.
    """
    try:
        yield
    except ValueError as exc:
        st.error(f"{title}. {plain(exc)}")
    except Exception as exc:  # noqa: BLE001 - the page must not show a traceback
        log.exception("unexpected error: %s", title)
        st.error(f"{title}: unexpected {type(exc).__name__}: {plain(exc)}. Nothing you had loaded was changed.")


def cancel_button(container: Any, key: str, help: str) -> None:
    """The Cancel button (widget ``key``) of a long run that is starting in this script run, in
    ``container``. Pressing it reruns the script, which stops the run, unless the run has just
    ended: :func:`run_kept` marks that, and :func:`cancel_outcome` says which happened."""
    st.session_state[_going(key)] = True
    container.button("Cancel", key=key, help=help)


def run_kept(key: str) -> None:
    """The run whose Cancel button is ``key`` has ended and its result is kept."""
    st.session_state[_going(key)] = False


def cancel_outcome(key: str, previous: str | None) -> None:
    """After a press of the Cancel button ``key``: a warning that the run was stopped and no new
    result kept (``previous``: what is shown instead, e.g. "the previous audit", or None), or,
    when the run had ended and kept its result before the press reached it, a note saying so:
    a page must never say "no new result was kept" above the new result."""
    if not st.session_state.get(key):
        return
    if st.session_state.get(_going(key), False):
        st.session_state[_going(key)] = False
        st.warning("Cancelled: no new result was kept" + (f" — {previous} is shown below." if previous else "."))
    else:
        st.info("The run had ended before Cancel reached it: its result is kept and shown below.")


def _going(key: str) -> str:
    return f"{key}__run_going"


def show_guarantee(container: Any, g: Any, what: str = "this answer") -> None:
    """The one way a page says what an answer guarantees (:func:`core.model.guarantee.guarantee_line`),
    beside the answer: every page, for every kind of model."""
    container.caption(plain(guarantee_line(g, what)))


def show_constraints(container: Any, schema: Any, honoured: bool = True) -> None:
    """The analyst's constraints between features beside an answer: those in force, or,
    for an analysis that cannot take them, that it does not (never a silent omission)."""
    lines = [line.strip() for line in getattr(schema, "constraints", ()) if line.strip()
             and not line.strip().startswith("#")]
    if not lines:
        return
    listed = "; ".join(lines)
    container.caption(plain(f"Constraints between features in force: {listed}." if honoured else
                            f"This analysis does not take the constraints between features into account ({listed})."))


def progress_bar(bar: Any, what: str) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback of the library drawing ``bar`` ("3 of 20 rows")."""
    def tell(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"{done} of {total} {what}")
    return tell


def cluster_setting(container) -> str | None:
    """The Dask scheduler address for this session's long runs, or None (local).
    Local instances take any address; a public one offers only the server's own."""
    dep = settings()
    if dep.allows_custom_cluster:
        address = container.text_input(
            "Dask scheduler address (empty: this machine)", value=state.get(state.Keys.CLUSTER) or "",
            placeholder="tcp://10.0.0.5:8786", key="fa_scheduler",
            help="Also used by FCCA and the batch of optimal counterfactuals. The workers need this repository "
                 "installed (pip install -e .).").strip()
    elif dep.scheduler:
        use = container.checkbox(f"Use the server's Dask cluster ({dep.scheduler})", key="fa_use_cluster",
                                 value=bool(state.get(state.Keys.CLUSTER)))
        address = dep.scheduler if use else ""
    else:
        container.caption("Runs on this server (a public instance takes no cluster address).")
        address = ""
    state.put(state.Keys.CLUSTER, address)
    return address or None


def session_cluster() -> str | None:
    """The cluster address long runs of this session use (set by :func:`cluster_setting`);
    on a public instance only the server's own address can come back."""
    value = (state.get(state.Keys.CLUSTER) or "").strip()
    dep = settings()
    if not dep.allows_custom_cluster and value != (dep.scheduler or ""):
        return None
    return value or None


def big_table_gate(n_rows: int, what: str, key: str, limit: int = 20_000) -> bool:
    """On large tables, a first computation waits for a button instead of blocking
    the page on entry; True when it may run now."""
    if n_rows <= limit or st.session_state.get(key):
        return True
    st.info(f"{what} on {n_rows:,} rows takes a while, so it waits for you.")
    if st.button(what, key=f"{key}_button", type="primary"):
        st.session_state[key] = True
        return True
    return False


DOWNLOADS = "_downloads"   # session key: per download key, (source, token, payload) of the file last built


def download(container: Any, label: str, data: Any, file_name: str, mime: str, key: str, *,
             source: Any = None, token: Any = None, prepare: bool = False, help: str | None = None) -> None:
    """A download button whose file always arrives.

    Streamlit's files built on click (a callable ``data``) are lost when the
    page reruns between the click and the request ("Deferred file not found":
    nothing arrives, no message); so the file is built here, once per result:
    a callable ``data`` runs when ``source`` (the result object, kept alive
    with the file) or ``token`` (e.g. a slider value) changed, and its bytes
    are kept in the session. ``prepare``: a big file waits for a click on
    "Prepare …" instead of being built on every visit. Clicking never reruns
    the page (``on_click="ignore"``)."""
    if callable(data):
        memo = st.session_state.setdefault(DOWNLOADS, {})
        held = memo.get(key)
        if held is None or source is None or not _same(held[0], source) or held[1] != token:
            if prepare and not container.button(f"Prepare {label[0].lower()}{label[1:]}", key=f"{key}_prepare"):
                return
            try:
                memo[key] = held = (source, token, data())
            except Exception as exc:   # the page stays; the user is told what failed
                container.error(f"{label} could not be built: {plain(str(exc) or type(exc).__name__)}")
                return
        data = held[2]
    container.download_button(label, data, file_name, mime, key=key, help=help, on_click="ignore")


def _same(a: Any, b: Any) -> bool:
    """The same result: the same object, or equal plain values (never a result's own ``==``)."""
    return a is b or (type(a) is type(b) and isinstance(a, (str, int, float, tuple)) and a == b)


def graph_downloads(source: str, stem: str, key: str) -> None:
    """Download buttons for a Graphviz figure: SVG and PNG (they need Graphviz's
    ``dot``; rendered once per figure) and its DOT source."""
    cols = st.columns(3)
    if dot.available():
        download(cols[0], "Figure (SVG)", lambda: dot.render(source, "svg"), f"{stem}.svg", "image/svg+xml",
                 key=f"{key}_svg", source=key, token=source)
        download(cols[1], "Figure (PNG)", lambda: dot.render(source, "png"), f"{stem}.png", "image/png",
                 key=f"{key}_png", source=key, token=source)
    else:
        cols[0].caption("SVG and PNG exports need Graphviz on the server (`apt-get install graphviz`).")
    download(cols[2], "Figure (DOT source)", source, f"{stem}.dot", "text/vnd.graphviz", key=f"{key}_dot")
