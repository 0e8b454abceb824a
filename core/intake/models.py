"""From a model file or a fitted model to the one representation: :func:`load_model`,
:func:`from_model`.

:func:`load_model` (``core.load_model``) reads a model file as a file from elsewhere must
be read: in a sandboxed child process first (:func:`core.intake.sandbox.load_vetted`: time
and memory limits, a crash contained), and a model that is not a tree ensemble or a linear
model is run in a sandboxed worker of its own (:class:`core.intake.worker.ModelWorker`),
never in the calling process. Reading in the calling process is an explicit choice
(``in_process=True``, :func:`core.intake.io.load_model`), for files one made oneself.

:func:`from_model` converts a fitted model of a supported family into a
:class:`core.model.TreeEnsemble` (the representation is documented in
:mod:`core.model`) with the parser of its library (:mod:`core.intake.parsing`), and
checks the result against the library's own predictions. ``core`` registers
:func:`from_model` and :func:`model_from` as :mod:`core.model`'s converters by their
path, so this module (and the parser of a model's library) is imported the first
time an analysis given a fitted model converts it with :func:`core.model.as_ensemble`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Sequence

from core.errors import SchemaError
from core.intake.parsing import parse, parse_any, verify_against_source, verify_linear
from core.model.ensemble import TreeEnsemble, _replace
from core.model.features import names_text
from core.model.linear import LinearModel
from core.typing import ModelLike

__all__ = ["from_model", "model_from"]


def from_model(model: ModelLike, *, feature_names: Sequence[str] | None = None,
               verify: bool = True) -> TreeEnsemble:
    """Convert a fitted model into a :class:`TreeEnsemble`.

    Parameters
    ----------
    model : a fitted model of a supported family (see
        ``core.intake.parsing.common.SUPPORTED_MODELS``),
        or a ``TreeEnsemble`` (returned as is, renamed if names are given).
    feature_names : optional names overriding the model's own.
    verify : if True, predictions of the result are compared with the source
        model's on random points and points on the split thresholds; a
        mismatch raises ``UnsupportedModelError`` rather than returning an
        approximation.

    Raises
    ------
    UnsupportedModelError
        For an unsupported type, objective or split kind.
    SchemaError
        For ``feature_names`` that are not one distinct name per feature.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import GradientBoostingClassifier
    >>> from core import from_model
    >>> X = np.random.default_rng(0).normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
    >>> gb = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    >>> ens = from_model(gb)
    >>> ens.n_trees, bool((ens.predict(X) == gb.predict(X)).all())
    (5, True)
    """
    ens = model if isinstance(model, TreeEnsemble) else parse(model)
    if feature_names is not None:
        ens = _replace(ens, feature_names=_names_given(feature_names, ens))
    if verify and not isinstance(model, TreeEnsemble):
        verify_against_source(ens, model)
    return ens


def _names_given(names: object, ens: TreeEnsemble) -> tuple[str, ...]:
    """``feature_names`` as given to :func:`from_model`: one distinct name per feature of
    the model, in its order, or :class:`SchemaError` saying what arrived and what to give."""
    d, own = ens.n_features, names_text(list(ens.feature_names), 6)
    if isinstance(names, (str, bytes, Mapping)) or not isinstance(names, Iterable):
        raise SchemaError(f"feature_names is a list of {d} names, one per feature of the model in its order "
                          f"(its own: {own}); got {type(names).__name__} {str(names)[:60]!r}.")
    given = [str(n) for n in names]
    if len(given) != d:
        raise SchemaError(f"feature_names has {len(given)} name{'s' if len(given) != 1 else ''} "
                          f"{names_text(given, 6)}; the model has {d} features (its own names: {own}). Give one "
                          "name per feature, in the model's order, or leave feature_names out to keep its own.")
    twice = sorted({n for n in given if given.count(n) > 1})
    if twice:
        raise SchemaError(f"feature_names repeats {names_text(twice, 6)}; give each of the {d} features its own "
                          "name.")
    return tuple(given)


def model_from(model: ModelLike, *, verify: bool = True) -> TreeEnsemble | LinearModel:
    """Convert a fitted model into the representation the analyses read: a
    :class:`core.model.linear.LinearModel` for a supported linear model (or a pipeline
    ending in one), a :class:`TreeEnsemble` otherwise (as :func:`from_model`); each
    checked against the library's own outputs when ``verify``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from core.intake.models import model_from
    >>> X = np.random.default_rng(0).normal(size=(200, 3)); y = (X[:, 0] > 0).astype(int)
    >>> lin = model_from(LogisticRegression().fit(X, y))
    >>> lin.kind, bool((lin.predict(X) == (X @ lin.coef[0] + lin.intercept[0] > 0)).all())
    ('linear', True)
    """
    if isinstance(model, (TreeEnsemble, LinearModel)):
        return model
    out = parse_any(model)
    if isinstance(out, TreeEnsemble):
        if verify:
            verify_against_source(out, model)
        return out
    if verify:
        verify_linear(out, model)
    return out

