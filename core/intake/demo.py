"""Built-in demo datasets and models (no network, no files from outside).

* ``breast_cancer``: scikit-learn's bundled Wisconsin breast-cancer data
  (569 rows, 30 numerical features); target ``benign`` (1 = benign, 0 = malignant).
* ``synthetic_credit``: a generated credit-lending dataset with numerical,
  integer, binary and one-hot categorical features and a protected attribute
  ``sex`` (0 = male, 1 = female); target ``approved`` (1 = approved, 0 = declined).

Each demo names its classes (:attr:`DemoSpec.class_names`), so every page, the
story and the reports speak of "approved" and "declined", not of 1 and 0.

The deliberate bias of ``synthetic_credit``
-------------------------------------------
Applicants are approved when a latent credit score
``s = 1.1*z(income) - 1.4*debt_ratio + 0.25*history_years - 0.6*late_payments
+ 0.5*owns_home + employment effect + noise`` passes a bar. For applicants
with ``sex == 1`` the bar is higher by ``BIAS`` (0.9 score units, about the
effect of 1.5 late payments), while the features themselves are drawn from
the same distributions for both groups. A model trained on these labels
learns the gap, so women need larger changes to be approved: the recourse
cost gap a fairness audit should find.

The demo's second model version (:func:`updated_model`)
------------------------------------------------------
"Version 2" of the credit model is the same LightGBM recipe retrained on
3,000 later applications (seed 1) after a documented policy change: the lender
now counts each late payment as 0.9 score units instead of 0.6 (``LATE_V2``).
Recourse promised under version 1 that leaned on a high income despite late
payments may no longer be honoured: the Compare models page shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from core.intake.io import train_model

__all__ = ["breast_cancer", "synthetic_credit", "DEMOS", "DemoSpec", "build_demo", "BIAS", "updated_model",
           "UPDATES"]

BIAS = 0.9
LATE_V1, LATE_V2 = 0.6, 0.9      # score units per late payment, before and after the policy change
EMPLOYMENT = ("employed", "self_employed", "unemployed", "student")
CREDIT_CLASSES = {"0": "declined", "1": "approved"}
CANCER_CLASSES = {"0": "malignant", "1": "benign"}     # scikit-learn's coding of the Wisconsin data


def breast_cancer() -> tuple[pd.DataFrame, str]:
    """The breast-cancer table with its target column ``benign``."""
    from sklearn.datasets import load_breast_cancer

    b = load_breast_cancer(as_frame=True)
    df = b.frame.rename(columns={"target": "benign"})
    df.columns = [c.replace(" ", "_") for c in df.columns]
    return df, "benign"


def synthetic_credit(n: int = 3000, seed: int = 0, late_weight: float = LATE_V1) -> tuple[pd.DataFrame, str]:
    """The synthetic lending table with target ``approved``; see module doc
    (``late_weight``: score units per late payment, the policy the labels follow)."""
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    age = rng.integers(18, 76, n)
    income = np.round(rng.lognormal(mean=3.6, sigma=0.45, size=n), 1)  # thousands per year
    debt = np.round(rng.beta(2, 5, n), 3)
    history = np.minimum(rng.poisson(np.maximum(age - 18, 0) / 4), 40)
    late = np.minimum(rng.poisson(1.0, n), 10)
    home = (rng.random(n) < 0.35 + 0.004 * (age - 18)).astype(int)
    emp = rng.choice(len(EMPLOYMENT), size=n, p=[0.62, 0.18, 0.12, 0.08])
    emp_effect = np.array([0.4, 0.1, -0.9, -0.4])[emp]
    z_income = (np.log(income) - 3.6) / 0.45
    score = (1.1 * z_income - 1.4 * debt + 0.25 * np.sqrt(history) - late_weight * late + 0.5 * home
             + emp_effect + rng.normal(0, 0.5, n))
    approved = (score > -0.2 + BIAS * sex).astype(int)
    df = pd.DataFrame({
        "age": age, "income": income, "debt_ratio": debt, "credit_history_years": history,
        "late_payments": late, "owns_home": home,
    })
    for k, name in enumerate(EMPLOYMENT):
        df[f"employment={name}"] = (emp == k).astype(int)
    df["sex"] = sex
    df["approved"] = approved
    return df, "approved"


@dataclass(frozen=True)
class DemoSpec:
    """A built-in dataset and the model trained on it at first start."""

    title: str
    data: Callable[[], tuple[pd.DataFrame, str]]
    family: str
    params: dict[str, Any]
    description: str
    class_names: dict[str, str] = field(default_factory=dict)   # class label as text -> its name


DEMOS: dict[str, DemoSpec] = {
    "credit-lightgbm": DemoSpec(
        "Synthetic credit lending · LightGBM", synthetic_credit, "lightgbm",
        dict(n_estimators=100, max_depth=3, learning_rate=0.1),
        "Generated lending data with a protected attribute (sex) and a documented bias in the labels.",
        CREDIT_CLASSES),
    "cancer-rf": DemoSpec(
        "Breast cancer · random forest", breast_cancer, "random_forest",
        dict(n_estimators=100, max_depth=5),
        "scikit-learn's bundled Wisconsin breast-cancer data, 30 numerical features.", CANCER_CLASSES),
    "cancer-xgb": DemoSpec(
        "Breast cancer · XGBoost", breast_cancer, "xgboost",
        dict(n_estimators=100, max_depth=4, learning_rate=0.1),
        "The same data with a gradient-boosted XGBoost model.", CANCER_CLASSES),
}


#: demos with a second model version: key -> (title of the update, what changed)
UPDATES: dict[str, tuple[str, str]] = {
    "credit-lightgbm": ("Version 2 · retrained on later applications",
                        "The same LightGBM recipe retrained on 3,000 later applications, after the lender began "
                        f"counting each late payment as {LATE_V2} score units instead of {LATE_V1}."),
}


def updated_model(key: str) -> tuple[Any, str, str]:
    """The second version of a demo's model (see the module doc): the fitted model,
    its title and what changed. KeyError for a demo without one."""
    title, what = UPDATES[key]
    spec = DEMOS[key]
    df, target = synthetic_credit(seed=1, late_weight=LATE_V2)
    trained = train_model(df.drop(columns=[target]), df[target], spec.family, random_state=1, **spec.params)
    return trained.model, title, what


def build_demo(key: str) -> tuple[pd.DataFrame, str, Any, float]:
    """Data, target, trained model and held-out accuracy of a demo."""
    spec = DEMOS[key]
    df, target = spec.data()
    X = df.drop(columns=[target])
    trained = train_model(X, df[target], spec.family, random_state=0, **spec.params)
    return df, target, trained.model, trained.holdout_score
