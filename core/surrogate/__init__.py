"""Any other model through a surrogate: distilled, measured, and every answer checked on the model.

:mod:`core.surrogate.distill` fits a tree-ensemble surrogate to a model's answers
(its data rows and points near its decision boundary) and measures its fidelity;
:mod:`core.surrogate.repair` finds a counterfactual on the surrogate, checks it on
the model itself, and repairs it when the model disagrees.
"""

from core.surrogate.distill import Surrogate, decode_frame, distill

__all__ = ["Surrogate", "distill", "decode_frame"]
