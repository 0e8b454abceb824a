"""Guarantee: what every answer says it guarantees, in fields and in words."""

from __future__ import annotations

import json

import pytest

from core.errors import AtlasError
from core.model import Guarantee


def test_round_trip_keeps_every_field_and_the_words():
    g = Guarantee("valid_on_model", "black_box", surrogate_fidelity=0.973, boundary_fidelity=0.91,
                  note="Repaired in 2 rounds.")
    d = json.loads(g.to_json())
    assert d["text"] == g.text()
    assert Guarantee.from_json(g.to_json()) == g
    assert Guarantee.from_dict(d) == g


@pytest.mark.parametrize("g, words", [
    (Guarantee("proven_optimal", gap=0.0), "Proven optimal on the tree ensemble."),
    (Guarantee("proven_optimal", "linear"), "Proven optimal (exact for a linear model)."),
    (Guarantee("exact"), "Exact on the tree ensemble."),
    (Guarantee("time_limited", gap=0.042, bound=1.5),
     "Valid on the tree ensemble; not proven optimal: the solver stopped at its time limit with a gap of 4.2%."),
    (Guarantee("time_limited", gap=float("inf")), "with an unknown gap."),
    (Guarantee("valid_on_model", "black_box", surrogate_fidelity=0.973),
     "Valid on the uploaded model (checked on it); optimal for its surrogate (agreement with the model 97.3% on "
     "held-out rows), not proven optimal for the model."),
    (Guarantee("exact", "black_box", surrogate_fidelity=0.95, boundary_fidelity=0.8),
     "Exact on its surrogate (agreement with the model 95.0% on held-out rows, 80.0% near the decision "
     "boundary), not on the model itself."),
    (Guarantee("infeasible", "linear"), "Proven: no answer exists on the linear model under the constraints asked."),
    (Guarantee("not_found", "black_box", note="The model refused every candidate."),
     "Nothing valid was found; nothing is proven either way. The model refused every candidate."),
])
def test_the_words_say_what_holds(g, words):
    assert words in g.text()


def test_proven_only_on_the_model_itself():
    assert Guarantee("proven_optimal").proven and Guarantee("infeasible").proven
    assert not Guarantee("valid_on_model", "black_box", surrogate_fidelity=0.9).proven
    with pytest.raises(AtlasError, match="surrogate cannot be proven optimal"):
        Guarantee("proven_optimal", surrogate_fidelity=0.99)
    with pytest.raises(AtlasError, match="not read exactly"):
        Guarantee("proven_optimal", "black_box")


@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "optimal"}, "Unknown guarantee kind"),
    ({"kind": "exact", "model_kind": "neural"}, "Unknown model kind"),
    ({"kind": "valid_on_model", "surrogate_fidelity": 1.5}, "between 0 and 1"),
])
def test_bad_values_are_refused_with_the_choices(kwargs, match):
    with pytest.raises(AtlasError, match=match):
        Guarantee(**kwargs)
    assert issubclass(AtlasError, ValueError)
