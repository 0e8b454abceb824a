"""AppTest of the Decision regions page on the built-in demo."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from core.regions import RegionSet


@pytest.fixture
def at(page_app):
    return page_app("decision_regions.py")


def _metrics(at):
    return {m.label: m.value for m in at.metric}


def test_slice_and_exact_counterfactual(at):
    m = _metrics(at)
    assert int(m["Regions drawn"].replace(",", "")) > 10
    assert m["Counterfactual"] == "optimal"
    assert any("Exact counterfactual" in md.value for md in at.markdown)
    assert not at.error


def test_projection_and_feature_choice(at):
    at.radio(key="dr_mode").set_value("projection").run()
    assert not at.exception
    assert int(_metrics(at)["Regions drawn"].replace(",", "")) >= 1
    at.selectbox(key="dr_fb").set_value(at.selectbox(key="dr_fa").value).run()
    assert any("two different features" in e.value for e in at.error)


def test_regions_cap_warns(at):
    at.number_input(key="dr_max").set_value(50).run()
    assert _metrics(at)["Regions drawn"] == "50"
    assert any("Only the first" in w.value for w in at.warning)


def test_the_regions_download_is_rounded_for_people_and_its_json_exact(downloads, page_app):
    """#59 item 8: the CSV's bounds read as a person reads them (a column of whole numbers
    as whole numbers, no 1.0000000180025095e-35), with what they guarantee; the JSON holds
    the exact bounds, and each rounded one is the exact one's whole part."""
    at = page_app("decision_regions.py")
    ws = at.session_state["workspace"]
    table = pd.read_csv(io.StringIO(downloads["dr_dl"]))
    rs = RegionSet.from_json(downloads["dr_dl_json"])
    assert len(rs.regions) == len(table) > 10
    assert "e-" not in downloads["dr_dl"] and set(table["guarantee"]) == {"exact"}
    integral = [f.name for f in ws.schema.features if f.kind == "integer"]
    drawn = [c[:-2] for c in table.columns if c.endswith(" >")]
    assert set(drawn) & set(integral), drawn
    for name in set(drawn) & set(integral):
        j = ws.schema.names.index(name)
        for col, side in ((f"{name} >", "lower"), (f"{name} <=", "upper")):
            exact = np.array([getattr(r, side)[j] for r in rs.regions])
            assert np.array_equal(table[col].to_numpy(float), np.floor(exact)), col
