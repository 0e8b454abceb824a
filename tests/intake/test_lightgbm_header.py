"""LightGBM text whose header disagrees with itself, its objective or its trees
(issue 37, item 4).

An outside trial: ``num_class=1`` with ``objective=multiclass num_class:3`` was
accepted as a one-class classifier (probability 1.0 everywhere, where LightGBM gives
0.19 to 0.71), and ``Booster.predict`` on the object the server kept then crashed the
process (LightGBM writes three probabilities into a one-value row). Each header field
is now edited in turn (``tests/intake_mutations.lightgbm_header_edits``) on a binary, a
3-class and a regression model: every mutant is refused with a message naming what
disagrees, or read exactly as LightGBM reads it (its raw scores and its predictions,
taken in a separate process, so that a crash there cannot take this one down; every
third file also through the app's sandbox), and then the library's object in this
process predicts the same. No silent misread.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import AtlasError, ModelError
from core.intake import io
from core.intake.models import from_model
from core.intake.parsing.validate import lightgbm_text
from core.intake.sandbox import load_vetted
from tests.intake_mutations import lightgbm_header_edits, lightgbm_header_files, lightgbm_oracle

#: what a refusal of each kind of edit must name
NAMES = {"num_class": ("num_class",), "num_tree_per_iteration": ("num_tree_per_iteration", "num_class"),
         "objective": ("objective", "reg_sqrt"), "max_feature_idx": ("max_feature_idx", "feature"),
         "feature_names": ("max_feature_idx", "feature"), "feature_infos": ("feature_infos",),
         "monotone_constraints": ("monotone_constraints",), "label_index": ("label_index",),
         "end of trees": ("end of trees",), "tree": ("tree",)}


@pytest.fixture(scope="module")
def files():
    return lightgbm_header_files()


def _expected_words(case: str) -> tuple[str, ...]:
    """The words a refusal of the edit ``case`` must contain (its field, by the case's first word)."""
    for key, words in NAMES.items():
        if case.startswith(key):
            return words
    return NAMES["tree"] if "tree" in case else ()


def _ours(ens, X):
    if ens.is_classifier:
        proba = ens.predict_proba(X)
        return ens.predict_raw(X), proba[:, 1:] if ens.link == "sigmoid" else proba
    return ens.predict_raw(X), ens.predict(X)[:, None]


@pytest.mark.parametrize("base", ["binary.txt", "3-class.txt", "regression.txt"])
def test_header_disagreements_are_refused_or_read_as_lightgbm_reads_them(files, base):
    X = np.frombuffer(files["_X"]).reshape(-1, 4)
    cases = dict(lightgbm_header_edits(files[base]))
    assert len(cases) > 50
    refused, passed = {}, []
    for case, data in cases.items():
        try:
            lightgbm_text(data, base)                # the structural checks, in this process (no LightGBM)
            passed.append(case)
        except ModelError as exc:
            refused[case] = str(exc)
    # what LightGBM makes of the files that pass them, in another process: none may crash it
    truth = dict(zip(passed, lightgbm_oracle([cases[c] for c in passed], X)))
    crashed = [c for c, got in truth.items() if "crash" in got]
    assert not crashed, crashed
    accepted = {}
    for k, case in enumerate(passed):            # read: in process, and every third through the app's sandbox
        try:
            ens = from_model(io.load_model(cases[case], base))
            if k % 3 == 0:
                vetted = load_vetted(cases[case], base, time_limit=30)
                np.testing.assert_array_equal(vetted.ensemble.predict_raw(X), ens.predict_raw(X))
            accepted[case] = ens
        except AtlasError as exc:
            refused[case] = str(exc)
    for case, text in refused.items():
        words = _expected_words(case)
        assert text and "Traceback" not in text and (not words or any(w in text for w in words)), (case, text)
    misreads = []
    for case, ens in accepted.items():           # every accepted file: read as LightGBM reads it
        got = truth[case]
        raw, pred = _ours(ens, X)
        same = "raw" in got and np.allclose(pred, got["pred"], rtol=1e-9, atol=1e-12)
        if same and not got["average_output"]:   # boosting="rf": LightGBM's raw score is not averaged
            same = np.allclose(raw, got["raw"], rtol=1e-9, atol=1e-12)
        if not same:
            misreads.append((case, got))
    assert not misreads, misreads
    for case, ens in accepted.items():           # and the library's object in this process predicts the same
        _, pred = _ours(ens, X)
        model = io.load_model(cases[case], base)
        np.testing.assert_allclose(np.asarray(model.predict(X)).reshape(pred.shape), pred, rtol=1e-9, atol=1e-12,
                                   err_msg=case)
    # the consistent edits are read (a sigmoid of 2, one iteration less, average_output, a label index...)
    assert len(accepted) >= 5 and len(refused) >= 45, (sorted(accepted), len(refused))


def test_the_outside_trials_file_is_refused_naming_the_disagreement(files):
    text = files["3-class.txt"].decode().replace("num_class=3\n", "num_class=1\n", 1)
    text = text.replace("num_tree_per_iteration=3\n", "num_tree_per_iteration=1\n", 1)
    with pytest.raises(ModelError, match=r"objective says num_class:3 but its header num_class=1"):
        load_vetted(text.encode(), "m.txt")
    binary = files["binary.txt"].decode().replace("objective=binary sigmoid:1", "objective=multiclass num_class:3")
    with pytest.raises(ModelError, match=r"objective says num_class:3 but its header num_class=1"):
        lightgbm_text(binary.encode(), "m.txt")
    more = files["3-class.txt"].decode().replace("num_class=3\n", "num_class=1\n", 1)
    with pytest.raises(ModelError, match=r"num_tree_per_iteration is 3 but num_class is 1"):
        lightgbm_text(more.encode(), "m.txt")


def test_a_booster_in_memory_whose_header_disagrees_is_refused_by_the_parser(files):
    """The parser reads LightGBM's own view (``dump_model``) and refuses the same
    disagreement for a booster handed over in memory (no text checks ran)."""
    from core.errors import UnsupportedModelError
    from core.intake.parsing.lightgbm import _check_outputs

    _check_outputs("multiclass", {"num_class": "3"}, 3, 3)
    _check_outputs("binary", {"sigmoid": "1"}, 1, 1)
    for kind, params, per_iter, n_class in (("multiclass", {"num_class": "3"}, 1, 1),
                                            ("multiclass", {"num_class": "3"}, 3, 1),
                                            ("binary", {"sigmoid": "1"}, 3, 3)):
        with pytest.raises(UnsupportedModelError, match="disagree"):
            _check_outputs(kind, params, per_iter, n_class)
