"""The model: one internal representation for every supported tree-ensemble model.

:class:`TreeEnsemble` is what every analysis in ``core`` reads. It is built by
:func:`core.intake.models.from_model` from a scikit-learn, XGBoost or LightGBM model
(the parsers live in :mod:`core.intake.parsing`, one module per source library); an
analysis that is given a fitted model converts it with
:func:`as_ensemble`, through the converter ``core`` registers by its path (imported
the first time a fitted model arrives), so nothing here imports a parser or reads a
file format.

Tree layout (documented like scikit-learn's ``sklearn/tree/_tree.pyx``)
-----------------------------------------------------------------------
Each :class:`Tree` holds parallel arrays over its ``n_nodes`` nodes; node 0 is
the root and every child has a larger index than its parent:

children_left : ndarray of shape (n_nodes,), dtype int32
    Index of the left child, ``-1`` at a leaf.
children_right : ndarray of shape (n_nodes,), dtype int32
    Index of the right child, ``-1`` at a leaf.
feature : ndarray of shape (n_nodes,), dtype int32
    Feature split on, ``-1`` at a leaf.
threshold : ndarray of shape (n_nodes,), dtype float64
    Split threshold, NaN at a leaf.
value : ndarray of shape (n_nodes, n_outputs), dtype float64
    Leaf output (only read at leaves).
category_bits : ndarray of shape (n_nodes, n_words), dtype uint64
    At a categorical split, bit ``k`` (word ``k // 64``, bit ``k % 64``) is set
    iff category code ``k`` goes left; zero elsewhere. ``n_words`` is 0 when
    the tree has no categorical split.
missing_left : ndarray of shape (n_nodes,), dtype bool, or None
    At a numerical split, True iff a missing value (NaN) goes left, as the
    source library routes it (XGBoost's and LightGBM's default direction,
    scikit-learn's ``missing_go_to_left``); None when the source model takes
    no missing values (then the ensemble refuses rows with NaN). A split
    that only separates missing values ("every number left, NaN right") has
    the threshold ``MISSING_ONLY`` (the largest float64).

**One split rule**: at a numerical split a sample goes left iff
``x[feature] <= threshold``, with ``x`` compared as float64; at a categorical
split (``threshold`` is NaN) it goes left iff its category code ``x[feature]``
is in the node's left set (``category_bits``).

Categorical features
--------------------
``TreeEnsemble.categories[j]`` is None for a numerical feature, or the tuple
of the model's categories of feature ``j`` (their original values: str, int,
float or bool). Such a feature is given to the ensemble as an integer *code*:
``0 .. K-1`` for the ``K`` categories, and ``K`` (:meth:`TreeEnsemble.missing_code`)
for a missing or unseen value, routed at every split as the source library
routes one (so a categorical feature never holds NaN). Every split on a categorical feature is a categorical split. The parsers fold every library's own convention
into the threshold: scikit-learn casts X to float32 and tests
``float32(x) <= t``; XGBoost tests ``float32(x) < t`` with a float32 ``t``;
LightGBM tests ``x <= t`` in double precision. For the float32 rules the
stored threshold is the largest float64 ``T`` with
``float32(x) <= a  <=>  x <= T`` (rounding to float32 is monotone, so such
a ``T`` exists); see :func:`float32_le_bound`.

Missing values
--------------
A numerical feature may hold NaN when the ensemble routes missing values
(``TreeEnsemble.routes_missing``): prediction follows ``missing_left``. The
analyses never see NaN: :func:`core.model.missing.expand` rewrites the ensemble,
exactly, with one 0/1 column "is missing" per feature that has missing
values, so that "missing" is one more state of that feature (like a
category) that a counterfactual may keep or leave.

Aggregation
-----------
``raw = base_score + combine_t value_t[leaf_t(x)]`` with ``combine`` a sum
(boosting) or a mean (forests), of shape (n_samples, n_outputs). Then
``link`` maps raw to the model's output: ``"identity"`` (forest class
probabilities, regression values), ``"sigmoid"`` (binary boosting, with
``sigmoid_scale``), ``"softmax"`` (multiclass boosting) or ``"isolation"``
(Isolation Forest: raw is the mean path length, score ``-2**(-raw/c)``).

Where it lives
--------------
:class:`Tree` and the node-array helpers are in :mod:`core.model.tree`,
:class:`TreeEnsemble` and :func:`as_ensemble` in :mod:`core.model.ensemble`, the
stacked arrays and the walk (compiled ``_treewalk`` or numpy) in
:mod:`core.model.flatwalk`, with its switch ``core.model.flatwalk.USE_COMPILED``;
:mod:`core.model.categorical` and :mod:`core.model.missing` rewrite category splits
and missing values as exact 0/1 columns, and :mod:`core.model.native` feeds rows
back to the source model (verification and re-checks). :mod:`core.model.guarantee`
holds :class:`Guarantee`, what every answer says it guarantees (proven optimal, exact,
valid on the model, estimated) and about which kind of model. The names the analyses
use are importable from ``core.model``.

Linear models
-------------
:class:`LinearModel` (:mod:`core.model.linear`) holds a linear classifier or
regressor exactly (logistic regression, linear SVM, ridge, lasso, ... alone or
at the end of a pipeline whose scalers are folded in and whose encoders give
categorical features), documented there like the tree layout above. The
analyses that read it (the optimal counterfactual, decision-region slices) take
any model through :func:`as_model`; the others call :func:`as_ensemble`, which
refuses a linear model with a message naming what runs on it. Both kinds say
what they are with ``kind`` (``"tree_ensemble"`` / ``"linear"``).
"""

from core.model.ensemble import (
                                 Link,
                                 Task,
                                 TreeEnsemble,
                                 as_ensemble,
                                 as_model,
                                 register_converter,
                                 register_model_converter,
)
from core.model.features import ModelShape, check_model_shape, kind_of
from core.model.guarantee import Guarantee
from core.model.linear import LinearModel
from core.model.tree import (
                                 MISSING_ONLY,
                                 Tree,
                                 category_bits_from_sets,
                                 float32_floor,
                                 float32_le_bound,
                                 node_boxes,
                                 node_category_masks,
)

__all__ = ["TreeEnsemble", "LinearModel", "ModelShape", "check_model_shape", "kind_of", "as_model", "register_model_converter", "Guarantee", "Tree", "Link", "Task", "as_ensemble", "register_converter", "node_boxes",
           "node_category_masks", "float32_le_bound", "float32_floor", "category_bits_from_sets", "MISSING_ONLY"]
