"""Trusted pickles of hostile models, written by the tests themselves.

A pickle's class exists nowhere but in the file (as an analyst's own module ``evilmod`` would
be on the server's path): unpickling it runs its source, which defines a small scikit-learn
classifier of three features whose ``predict_proba`` runs a given body (it may fork, sleep,
crash, allocate, or return NaN) on the rows whose first value is 7, or on every row.
"""

from __future__ import annotations

import pickle
import textwrap

import numpy as np

SOURCE = """
import os, signal, sys, time
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

class Hostile(ClassifierMixin, BaseEstimator):
    def __init__(self):
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = 3

    def predict_proba(self, X):
        X = np.asarray(X, dtype=float)
        p = 1 / (1 + np.exp(-np.nan_to_num(X[:, 0])))
        if {trigger}:
{body}
        return np.column_stack([1 - p, p])

    def predict(self, X):
        return (np.asarray(X, dtype=float)[:, 0] > 0).astype(int)

model = Hostile()
"""
MARK = np.array([[7.0, 0.0, 0.0]])           # the row a marked model misbehaves on


class _Source:
    """Pickles to what ``source`` binds to ``model``, run where it is unpickled."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self):
        return eval, (f"(exec({self.source!r}, g := {{'__name__': 'evilmod'}}), g['model'])[1]",)


def hostile(body: str, *, always: bool = False) -> bytes:
    """A trusted pickle of a classifier whose predict_proba runs ``body`` (Python, may return)."""
    source = SOURCE.format(trigger="True" if always else "(X[:, 0] == 7).any()",
                           body=textwrap.indent(textwrap.dedent(body).strip(), " " * 12))
    return pickle.dumps(_Source(source))
