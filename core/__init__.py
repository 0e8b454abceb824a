"""Counterfactual Atlas core library: pure numpy/pandas/scikit-learn, no UI.

``core.ensemble.TreeEnsemble`` is the one representation every analysis
reads; ``core.io`` loads tables and models; ``core.schema`` describes features.
"""

__version__ = "0.1.0"
