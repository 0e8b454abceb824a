"""ONNX graphs built in tests, as a converter leaves them (shared by the intake and page tests)."""

from __future__ import annotations

from onnx import TensorProto, helper
from onnx import numpy_helper as nh


def affine_graph(outputs, W, b) -> bytes:
    """A regressor as a converter may leave it: X @ W ("mm"), plus a bias ("y"), through a sigmoid
    ("p"); ``outputs`` the tensors the graph gives out."""
    nodes = [helper.make_node("MatMul", ["X", "W"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["y"]),
             helper.make_node("Sigmoid", ["y"], ["p"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None, 1]) for n in outputs],
                          initializer=[nh.from_array(W, "W"), nh.from_array(b, "b")])
    return helper.make_model(g, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
