"""Counterfactual rules: local and regional (Amoukou & Brunel, paper 000).

A random-forest surrogate ``m`` is fitted on ``(X, f(X))``, the audited
model's outputs. Its training points and leaves give two estimators:

* **CDP** (Counterfactual Decision Probability, definition "CDP", estimator
  eq. ``CDP_estimator``): ``P(f(X) in Y* | X_Sbar = x_Sbar)`` by the
  *Projected Forest*: in every tree, ``x`` is dropped down with the splits on
  ``S`` sent both ways; the training points kept are those lying in the
  intersection of the reached leaves (equivalently: they agree with ``x`` at
  every reached split on a feature outside ``S``). Per tree,
  ``w_i = 1[i kept] / #kept``; ``CDP = mean_t sum_i w_i 1[Y_i in Y*]`` over the
  trees whose cell holds at least one training point. Implemented with bitsets
  over the training points (one per split node, built on first use) and
  evaluated for every subset of one size at once: at a split on a candidate
  feature the cell is ``left & right`` for the subsets containing it and
  ``agree & child`` for the others.
* **CRP** (Counterfactual Rule Probability, eqs. ``crp_instance`` and
  ``crp_rule``) by the *Regional RF*: at a split on a feature constrained to an
  interval ``(a, b]`` the query goes left if ``b <= t``, right if ``a > t``,
  both ways otherwise (a point ``x`` is the interval ``(x-, x]``); as the
  appendix "Regional RF detailed" argues, the estimate per tree is the share of
  target outputs among the training points in the union of the reached
  leaves, averaged over trees.

Search and rules (section "Learning the Counterfactual Rules"):

* **Minimal divergent explanations** (definition "minimal_countset"): subsets
  ``S`` of the ``top_k`` features most used by the surrogate's splits, by
  increasing size; all subsets of the first size with ``CDP >= pi``.
  Immutable features are never candidates. One-hot groups count as one
  feature (all their columns move together).
* **Local-CR** (definition "local_counterfactual_rule"): the training points
  with positive projected weight and a target output give the possible leaves:
  their forest cells (intersection of their leaves in every tree) restricted
  to ``S``. Cells with ``CRP >= pi_c`` are kept and merged greedily: starting
  from the best, a touching cell is absorbed when the bounding box of the
  union keeps ``CRP >= pi_c``. Cells that cannot be merged form the
  alternatives (the union is then disconnected, or joining it would drop below
  ``pi_c``).
* **Regional-CR** (definition "regional_rule"): the same for a box ``R``,
  conditioning on ``X_Sbar in R_Sbar`` with the Regional RF (CDP of a rule is
  the Regional RF with the ``S`` splits sent both ways).
* **Counterfactual samples** (appendix listing): simulated annealing over
  training values inside the rule, maximising the Isolation Forest's
  ``decision_function``; a candidate replaces the values of every feature of
  ``S`` by those of a training row lying inside the rule on that feature. The
  listing's acceptance test ``exp(-diff / t)`` always accepts a worse move;
  here a worse move is accepted with probability ``exp(diff / t)``, the usual
  Metropolis rule, with ``t = temp / log(i + 2)``.
* **Metrics** (section "Experiments"): correctness (share of counterfactual
  samples the audited model puts in ``Y*``), plausibility (share of samples the
  Isolation Forest fitted on the data calls inliers), sparsity (mean number of
  changed columns), coverage (share of queried rows that received a rule).

Intervals are half-open like tree splits: a value ``v`` satisfies a rule on
feature ``j`` iff ``lower[j] < v <= upper[j]``.

Actionability: ``fixed``, ``increase_only`` and ``decrease_only`` take feature
names or column indices. A direction restricts the admissible cells: the
possible cells come from target rows reached by moving each such feature in
its direction, and are cut to the values at or above (increase-only) or at or
below (decrease-only) the row's (module doc of :mod:`core.rules.search`).

The package: :mod:`core.rules.state` (``fit_state`` and the fitted state
``FittedRules`` every algorithm takes), :mod:`core.rules.engines` (CDP and
CRP), :mod:`core.rules.search` (divergent sets, local and regional rules),
:mod:`core.rules.sampling` (samples and metrics), all plain functions of the
state; :mod:`core.rules.estimator` (``CounterfactualRules``, the
scikit-learn-style wrapper keeping the state as ``state_``),
:mod:`core.rules.results` (what is returned), :mod:`core.rules.bitsets`
(bitsets and the compiled kernel), :mod:`core.rules.onmodel` (a rule applied at its
edge and checked on the model itself, for these rules and T-CREx's).
"""

from core.errors import NoCounterfactualRuleError
from core.rules.estimator import CounterfactualRules
from core.rules.results import Box, LocalRule, RegionalRule, RuleLevels, region_from_filter, rule_metrics
from core.rules.state import FittedRules, fit_state
from core.ruletext import rule_text

__all__ = ["CounterfactualRules", "FittedRules", "fit_state", "LocalRule", "RegionalRule", "Box", "RuleLevels",
           "NoCounterfactualRuleError", "region_from_filter", "rule_metrics", "rule_text"]
