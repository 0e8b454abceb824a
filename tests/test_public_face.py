"""The public face (issue 28 item 2): every name ``from core import ...`` lists in
``__all__`` resolves, each public function and class has a numpydoc docstring with
its parameters and a runnable example, and every example runs and gives what it says."""

from __future__ import annotations

import doctest
import inspect
import warnings

import pytest

import core

CALLABLE = sorted(n for n in core.__all__ if n[0].islower() or n in ("TCREx", "CounterfactualRules", "Schema"))


def test_every_public_name_resolves():
    assert sorted(core._PUBLIC) == core.__all__                 # one list, kept sorted
    for name in core.__all__:
        assert getattr(core, name) is not None, name
    assert set(dir(core)) >= set(core.__all__)
    with pytest.raises(AttributeError):
        core.no_such_name  # noqa: B018


@pytest.mark.parametrize("name", CALLABLE)
def test_docstring_has_parameters_and_a_runnable_example(name):
    obj = getattr(core, name)
    doc = inspect.getdoc(obj) or ""
    assert "Examples\n--------" in doc, f"{name} has no Examples section"
    if name != "Schema":
        assert "Parameters\n----------" in doc, f"{name} documents no parameters"
    finder = doctest.DocTestFinder(recurse=False)
    tests = [t for t in finder.find(obj, name, globs={}) if t.examples]
    assert tests, name
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for t in tests:
            runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} example lines failed"
