"""Counterfactual Atlas: the Streamlit entry point.

``streamlit run dashboard/app.py``. Navigation is explicit (``st.navigation``)
over the scripts in the top-level ``pages/`` folder, grouped by purpose; the
app opens on the built-in demo so every view works at once. A team's server
(an ``[auth]`` section in the secrets) asks every visitor to sign in first
(:mod:`dashboard.auth`).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # when run without `pip install -e .`
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from core.intake.demo import DEMOS  # noqa: E402
from dashboard import auth, share, state  # noqa: E402
from dashboard.caching import demo_workspace  # noqa: E402
from dashboard.deploy import settings as deployment  # noqa: E402
from dashboard.memory import start_janitor, track_session  # noqa: E402
from dashboard.pages_registry import PAGES  # noqa: E402
from dashboard.tables import install as arrow_safe_tables  # noqa: E402
from dashboard.ui import plain  # noqa: E402

st.set_page_config(page_title="Counterfactual Atlas", page_icon=str(ROOT / "assets" / "favicon.svg"), layout="wide")
arrow_safe_tables()      # every table the pages show reaches the browser without an Arrow fallback
state.init_state()
track_session()
start_janitor()
author = auth.gate()     # without sign-in configured: None; else the signed-in user (the rest waits for one)
share.restore()

if state.get(state.Keys.WORKSPACE) is None and state.get(state.Keys.DEMO) is None:
    default = next(iter(DEMOS))
    try:
        state.put(state.Keys.WORKSPACE, demo_workspace(default))
        state.put(state.Keys.DEMO, default)
    except Exception as exc:  # the app must still open: the data page explains
        state.put(state.Keys.LAST_ERROR, f"The built-in demo could not be built: {exc}")
        state.put(state.Keys.DEMO, "")

groups = {group: [st.Page(str(ROOT / "pages" / f), title=title, icon=icon, url_path=f[:-3])
                  for f, title, icon in items]
          for group, items in PAGES.items() if items}
state.register_pages({p.url_path: p for items in groups.values() for p in items})
nav = st.navigation(groups)

with st.sidebar:
    ws = state.get(state.Keys.WORKSPACE)
    st.caption("Counterfactual Atlas")
    if author is not None:
        auth.sidebar(author)
    if deployment().public:
        st.info(deployment().notice(), icon=":material/lock:")
    if ws is not None:
        n_cols = len(ws.columns)
        what = (f"{plain(ws.ensemble.source)} · {ws.ensemble.n_trees} trees" if ws.model_kind == "tree_ensemble"
                else plain(ws.kind_text))
        st.markdown(f"**{plain(ws.name)}**  \n{what} · {len(ws.X):,} rows × {n_cols} column{'s' * (n_cols != 1)}")
    share.share_button()

share.check_link(state.get(state.Keys.WORKSPACE))
share.link_notice()
share.publish()
share.note_settings()    # each page's settings as the analyst left them (its widgets' defaults: share.kept)
nav.run()
