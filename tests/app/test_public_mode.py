"""Public-deployment mode: no pickle, no user-chosen cluster, capped uploads."""

from __future__ import annotations

import os
import pickle
import textwrap

import pandas as pd
import pytest

from core.errors import DataError, UntrustedPickleError
from dashboard import deploy, loaders

PUBLIC = deploy.Deployment(public=True, max_upload_mb=1, max_rows=100, scheduler=None)
LOCAL = deploy.Deployment(public=False, max_upload_mb=200, max_rows=None, scheduler=None)


def test_one_setting_from_the_environment_or_the_config_file(tmp_path):
    cfg = tmp_path / "atlas.toml"
    assert not deploy.load({}, cfg).public                       # make run: local
    cfg.write_text('[atlas]\npublic = true\nmax_rows = 5000\ndask_scheduler = "tcp://10.0.0.5:8786"\n')
    dep = deploy.load({}, cfg)
    assert dep.public and dep.max_rows == 5000 and dep.max_upload_mb == 50 and dep.scheduler == "tcp://10.0.0.5:8786"
    assert not deploy.load({"ATLAS_PUBLIC": "0"}, cfg).public     # the environment wins
    assert deploy.load({"ATLAS_PUBLIC": "1"}, tmp_path / "none.toml").public
    assert "pickle" in dep.notice() and "5,000 rows" in dep.notice()
    assert deploy.load({}, tmp_path / "none.toml").notice() == ""


def test_public_loader_never_unpickles(monkeypatch):
    import joblib

    def forbidden(*a, **k):
        raise AssertionError("unpickled an upload on a public instance")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(joblib, "load", forbidden)
    data = b"\x80\x04\x95" + b"\x00" * 64
    for trust in (True, False):
        with pytest.raises(UntrustedPickleError):
            loaders.read_model(data, "model.pkl", trust, PUBLIC)


def test_caps_on_size_and_rows():
    small = pd.DataFrame({"a": range(150), "b": range(150)}).to_csv(index=False).encode()
    with pytest.raises(DataError, match="at most 100"):
        loaders.read_table(small, "t.csv", PUBLIC)
    assert len(loaders.read_table(small, "t.csv", LOCAL)) == 150
    with pytest.raises(DataError, match="up to 1 MB"):
        loaders.read_table(b"a,b\n" + b"1,2\n" * 400_000, "big.csv", PUBLIC)


def test_public_audit_page_offers_no_cluster_address(page_app, monkeypatch):
    monkeypatch.setenv("ATLAS_PUBLIC", "1")
    deploy.settings.cache_clear()
    try:
        app = page_app("fairness_audit.py")
        labels = [w.label for w in app.text_input]
        assert not any("Dask" in lab for lab in labels), labels
        assert any("public instance" in c.value for c in app.caption)
    finally:
        deploy.settings.cache_clear()


GUARD = textwrap.dedent('''
    import os, pickle
    _marker = os.environ["ATLAS_TEST_UNPICKLE_MARKER"]
    _loads, _load = pickle.loads, pickle.load

    def _flag(data):
        if b"ATLAS-PICKLE-PROBE" in bytes(data):
            open(_marker, "w").write("unpickled")

    def loads(data, *a, **k):
        _flag(data)
        return _loads(data, *a, **k)

    def load(fh, *a, **k):
        pos = fh.tell() if hasattr(fh, "tell") else None
        if pos is not None:
            _flag(fh.read()); fh.seek(pos)
        return _load(fh, *a, **k)

    pickle.loads, pickle.load = loads, load
    import joblib
    _jl = joblib.load

    def jl(f, *a, **k):
        if hasattr(f, "read"):
            pos = f.tell(); _flag(f.read()); f.seek(pos)
        return _jl(f, *a, **k)

    joblib.load = jl
''')


@pytest.mark.browser
@pytest.mark.slow
def test_public_instance_never_opens_an_uploaded_pickle(tmp_path):
    """Upload a pickle (under its own name and disguised as .json/.skops) to a public
    instance whose pickle and joblib are watched: no path reaches them."""
    from browser_util import browser_page, running_app, upload, wait_idle

    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    marker = tmp_path / "unpickled"
    payload = pickle.dumps({"probe": "ATLAS-PICKLE-PROBE"})
    data = tmp_path / "data.csv"
    pd.DataFrame({"a": [1, 2, 3, 4], "b": [0, 1, 0, 1], "y": [0, 1, 0, 1]}).to_csv(data, index=False)
    path = os.pathsep.join(p for p in (str(guard), os.environ.get("PYTHONPATH", "")) if p)
    env = {"ATLAS_PUBLIC": "1", "PYTHONPATH": path, "ATLAS_TEST_UNPICKLE_MARKER": str(marker)}
    with running_app(env=env) as url, browser_page() as page:
        page.goto(url)
        page.get_by_role("heading", name="Data & model").wait_for(timeout=90_000)
        assert page.get_by_text("Public instance").count() >= 1
        page.get_by_text("Upload your own").click()
        upload(page, "Data (CSV or Parquet)", str(data))
        try:
            page.get_by_text("Target column").wait_for(timeout=120_000)
        except Exception as e:  # say what the page showed instead
            page.screenshot(path=str(tmp_path / "public-upload.png"), full_page=True)
            raise AssertionError(f"no target picker after the upload; the page read:\n"
                                 f"{page.inner_text('body')[:3000]}") from e
        assert page.get_by_text("I trust this file").count() == 0
        for name in ("model.pkl", "model.json", "model.skops", "model.joblib"):
            f = tmp_path / name
            f.write_bytes(payload)
            upload(page, "Model file", str(f))
            # the uploader lists the file once it is sent; then the rerun it asks for ends
            page.locator('[data-testid="stFileUploader"]').filter(has_text="Model file").get_by_text(
                name, exact=True).wait_for(timeout=60_000)
            wait_idle(page, quiet=500)
            load = page.get_by_role("button", name="Load data and model")
            if load.is_enabled():
                load.click()
                wait_idle(page, quiet=500)           # the load's script run is over: it has opened the file or not
        page.screenshot(path=str(tmp_path / "public.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
    assert not marker.exists(), "a pickle upload reached pickle/joblib on a public instance"
