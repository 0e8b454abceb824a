"""The page says what happened to a model that failed in its worker (issue 60, items 4 and 6).

A trusted pickle of a model the Atlas does not read exactly runs in its sandboxed worker.
One that segfaulted, asked for 20 GB or slept ten minutes was shown as "Unsupported model
type evilmod.Hostile. Supported: …", a list of tree formats, with the crash, the memory or
the time limit at the end of a long paragraph if at all, and one answering NaN was loaded.
The page now leads with what happened (the signal, the memory limit, the time limit, the
NaN) and what to do.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from conftest import ROOT
from hostile_models import hostile
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")


def test_a_crash_memory_or_time_limit_is_named_on_the_page(monkeypatch):
    monkeypatch.setenv("ATLAS_WORKER_MEMORY_MB", "1024")
    monkeypatch.setenv("ATLAS_WORKER_LOAD_SECONDS", "2")
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"]).assign(label=lambda d: (d.a > 0) * 1)
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", df.to_csv(index=False).encode(), "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value("label").run()
    before = at.session_state["workspace"]
    for name, body, said in [
        ("segv.pkl", "import ctypes; ctypes.string_at(0)", r"crashed with signal 11 \(SIGSEGV\).* check that it runs"),
        ("huge.pkl", "x = np.ones(20 * 2**30 // 8)", r"ran out of memory .*limit of 1,024 MB.* ATLAS_WORKER_MEMORY_MB"),
        ("slow.pkl", "time.sleep(600)", r"longer than the time limit of 2 s .* ATLAS_WORKER_LOAD_SECONDS"),
        ("nan.pkl", "return np.full((len(X), 2), np.nan)", r"answered NaN \(not a number\) .*check it"),
    ]:
        at.file_uploader(key="dm_model_file").upload(name, hostile(body, always=True))
        at.run()
        at.checkbox(key="dm_trust").check().run()
        at.button(key="dm_load").click().run()
        assert not at.exception, at.exception
        shown = [e.value for e in at.error]
        assert len(shown) == 1 and re.match(rf"The model could not be loaded\. (The model|'{name}') ", shown[0]), shown
        assert re.search(said, shown[0]), shown                   # what happened, and what to do
        assert "Unsupported model type" not in shown[0] and "Supported:" not in shown[0], shown
        assert at.session_state["workspace"] is before            # what was loaded is kept
