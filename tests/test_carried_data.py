"""The datasets the tests carry (tests/data): what their README says they are, and,
where ../shared/data exists, exactly what tests/data/make_samples.py writes from it."""

from __future__ import annotations

import importlib.util

import pandas as pd
from conftest import CARRIED_DATA, SHARED_DATA, carried_data


def test_the_carried_files_hold_what_the_readme_says():
    compas = pd.read_csv(carried_data("compas.csv"), header=[0, 1])
    adult = pd.read_csv(carried_data("adult_sample.csv"), header=[0, 1])
    assert len(compas) == 5278 and len(adult) == 10_000
    assert list(adult.columns.get_level_values(1)).count("T") == 1
    adult.columns = adult.columns.get_level_values(0)
    levels = {"MaritalStatus": 7, "Occupation": 14, "Relationship": 6, "WorkClass": 7}
    for c, k in levels.items():                           # every category, at least 3 rows of each
        counts = adult[c].value_counts()
        assert len(counts) == k and counts.min() >= 3, (c, counts.to_dict())
    assert sum(p.stat().st_size for p in CARRIED_DATA.iterdir()) < 1_500_000


def _make_samples():
    spec = importlib.util.spec_from_file_location("make_samples", CARRIED_DATA / "make_samples.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    return make


# Defined only where ../shared/data holds the sources: elsewhere there is nothing to compare
# with, and an empty parametrization would be reported as a skip.
if (SHARED_DATA / "compas.csv").is_file():
    def test_the_carried_compas_is_the_shared_file():
        assert carried_data("compas.csv").read_bytes() == (SHARED_DATA / "compas.csv").read_bytes()

if (SHARED_DATA / "adult.csv").is_file():
    def test_the_carried_adult_sample_is_what_the_script_writes(tmp_path):
        _make_samples().adult_sample(SHARED_DATA / "adult.csv", tmp_path / "adult_sample.csv")
        assert carried_data("adult_sample.csv").read_bytes() == (tmp_path / "adult_sample.csv").read_bytes()
