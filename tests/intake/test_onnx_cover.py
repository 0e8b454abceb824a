"""The verification's probe rows reach every leaf of ONNX exports too (issue 62, item 2).

The tests of ``tests/model/test_cover.py`` that take a model, run on a random forest exported
by skl2onnx and an XGBoost model with missing values exported by onnxmltools, read back as an
app user's file is: every leaf reached, the compiled and numpy rows the same, and a leaf value
misread where no random row goes refused by the comparison with onnxruntime. (The converters
are development requirements: these run with the main tests, not on the second Python.)
"""

from __future__ import annotations

import numpy as np
import pytest

from core.intake.models import from_model
from tests.model.test_cover import (
    _random_forest,
    _xgboost_with_missing,
    test_a_leaf_misread_where_no_random_row_goes_is_refused,  # noqa: F401
    test_every_leaf_is_reached_by_the_probe_rows,  # noqa: F401
    test_the_compiled_and_numpy_rows_are_the_same,  # noqa: F401
)


def _onnx(make):
    """The model ``make`` gives, exported to ONNX as a data scientist would and read back."""
    from core.intake.io import load_model

    m = make()
    if type(m).__module__.startswith("xgboost"):
        from onnxmltools.convert import convert_xgboost
        from onnxmltools.convert.common.data_types import FloatTensorType

        data = convert_xgboost(m, initial_types=[("input", FloatTensorType([None, 6]))]).SerializeToString()
    else:
        from skl2onnx import to_onnx

        data = to_onnx(m, np.zeros((1, 6), dtype=np.float32), options={"zipmap": False}).SerializeToString()
    return load_model(data, "model.onnx")


@pytest.fixture(scope="module", params=["random forest", "xgboost, missing values"])
def model(request):
    m = _onnx({"random forest": _random_forest, "xgboost, missing values": _xgboost_with_missing}[request.param])
    return m, from_model(m)
