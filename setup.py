"""Build the optional compiled kernels: the tree traversal (core/model/_treewalk.c),
the projected-forest cells of the counterfactual rules (core/rules/_projected.c),
the node bound of the box search (core/solvers/_boxsearch.c) and the reading of an
ONNX tree ensemble's node attributes from protobuf's wire bytes
(core/intake/parsing/_wire.c).

Project metadata lives in pyproject.toml. The extensions are optional: without
a C compiler the install still succeeds and core falls back to numpy.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("core.model._treewalk", ["core/model/_treewalk.c"], optional=True,
                             extra_compile_args=["-O3"]),
                   Extension("core.rules._projected", ["core/rules/_projected.c"], optional=True,
                             extra_compile_args=["-O3"]),
                   Extension("core.solvers._boxsearch", ["core/solvers/_boxsearch.c"], optional=True,
                             extra_compile_args=["-O3"]),
                   Extension("core.intake.parsing._wire", ["core/intake/parsing/_wire.c"], optional=True,
                             extra_compile_args=["-O3"])])
