"""The built-in demos build offline, and the synthetic credit data carries its documented bias."""

import numpy as np
import pytest

from core.intake.demo import BIAS, DEMOS, build_demo, synthetic_credit
from core.intake.models import from_model


@pytest.mark.parametrize("key", list(DEMOS))
def test_demos_build_and_predict_well(key):
    df, target, model, holdout = build_demo(key)
    assert holdout >= 0.85
    ens = from_model(model)
    X = df.drop(columns=[target]).to_numpy(float)
    np.testing.assert_array_equal(ens.predict(X), model.predict(df.drop(columns=[target])))
    assert ens.feature_names == tuple(df.drop(columns=[target]).columns)


def test_synthetic_credit_is_deterministic_and_biased():
    a, _ = synthetic_credit(2000, seed=3)
    b, _ = synthetic_credit(2000, seed=3)
    assert a.equals(b)
    df, _ = synthetic_credit(20000, seed=0)
    # same feature distributions for both groups ...
    for col in ("income", "debt_ratio", "late_payments"):
        m0, m1 = df.loc[df.sex == 0, col].mean(), df.loc[df.sex == 1, col].mean()
        assert abs(m0 - m1) < 0.05 * max(abs(m0), 1e-9) + 0.02
    # ... but a lower approval rate for sex == 1, from the higher bar
    gap = df.loc[df.sex == 0, "approved"].mean() - df.loc[df.sex == 1, "approved"].mean()
    assert BIAS > 0 and gap > 0.15


def test_demos_name_their_classes():
    """The demos speak in words (#38 item 4): credit "approved" / "declined", breast cancer "benign" /
    "malignant" as scikit-learn codes them; the app's demo workspace carries the names."""
    from sklearn.datasets import load_breast_cancer

    from dashboard.caching import demo_workspace

    assert DEMOS["credit-lightgbm"].class_names == {"0": "declined", "1": "approved"}
    names = load_breast_cancer().target_names
    for key in ("cancer-rf", "cancer-xgb"):
        assert DEMOS[key].class_names == {str(k): str(v) for k, v in enumerate(names)}
    df, target = synthetic_credit(500)
    assert target == "approved" and set(df[target]) == {0, 1}
    ws = demo_workspace("credit-lightgbm")
    assert ws.outcome_text(0) == "declined (0)" and ws.outcome_text(1) == "approved (1)"
