"""Build the optional compiled tree traversal (core/_treewalk.c).

Project metadata lives in pyproject.toml. The extension is optional: without
a C compiler the install still succeeds and core falls back to numpy.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("core._treewalk", ["core/_treewalk.c"], optional=True,
                             extra_compile_args=["-O3"])])
