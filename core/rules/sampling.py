"""Counterfactual samples from a rule (simulated annealing on the Isolation
Forest's score, the paper's appendix listing) and the paper's metrics over
many rows, as plain functions of the fitted state
(:class:`core.rules.state.FittedRules`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from core.counterfactual import output_mask
from core.errors import NoCounterfactualRuleError
from core.rules.reach import Reach, rule_reach
from core.rules.results import Bounded, rule_metrics
from core.rules.search import local_rule
from core.rules.state import FittedRules
from core.typing import Features, Row, Rows

if TYPE_CHECKING:
    from core.constraints import Constraints

__all__ = ["sample_counterfactuals", "inlier", "evaluate"]


def sample_counterfactuals(state: FittedRules, x: Row, rule: Bounded, n: int = 5, *, batch: int = 100,
                           max_iter: int = 100, temp: float = 1.0, patience: int = 20,
                           random_state: int | None = None, constraints: Constraints | None = None) -> np.ndarray:
    """Up to ``n`` distinct points ``(z_S, x_Sbar)`` with ``z_S`` inside the
    rule, the most plausible found by simulated annealing (appendix), best
    first: shape (k, n_features), k <= n (fewer when the training values
    inside the rule allow fewer combinations). Only the features the rule
    bounds change (so a rule found with increase-only / decrease-only
    features gives samples that respect them). The energy is the Isolation
    Forest's decision_function, and a candidate the surrogate does not put
    in the rule's target (when the rule has one) ranks below every candidate
    it does: a rule holds with probability CRP, and its samples should land
    where it holds. ``random_state`` defaults to the fitted one.

    ``constraints`` (a parsed :class:`core.constraints.Constraints`, or None): a sample
    must keep them; a candidate that breaks one is never kept, and when none keeps them
    the sample is the row's least move into the rule that does (:mod:`core.rules.reach`;
    :class:`NoCounterfactualRuleError` when the row cannot reach the rule at all)."""
    x = state.row(x)
    lower, upper = np.asarray(rule.lower, float), np.asarray(rule.upper, float)
    S = np.flatnonzero(np.isfinite(lower) | np.isfinite(upper))
    if not len(S):
        return x[None].copy()
    reach = rule_reach(constraints, S)
    rng = np.random.default_rng(state.random_state if random_state is None else random_state)
    sampler = _Sampler(state, x, _pools(state, state.units_of(S), lower, upper), rng, getattr(rule, "target", None),
                       reach)
    sampler.anneal(n, batch, max_iter, temp, patience)
    ranked = sorted(sampler.seen.values(), key=lambda p: -p[0])[:n]
    if not ranked and reach is not None:          # no sample keeps the constraints: the least move that does
        return _least_move(reach, x, lower, upper)
    return np.array([r for _, r in ranked])


def _pools(state: FittedRules, units: Any, lower: np.ndarray, upper: np.ndarray) -> list[tuple[list[int], np.ndarray]]:
    """Per unit the rule bounds: its columns and the fitted rows whose values on them lie inside the rule."""
    pools = []
    for u in units:
        cols = state.units[u]
        ok = np.all((state.X[:, cols] > lower[cols]) & (state.X[:, cols] <= upper[cols]), axis=1)
        rows = np.flatnonzero(ok)
        if not len(rows):
            names = [state.feature_names[j] for j in cols]
            raise NoCounterfactualRuleError(f"No observed value of {names} lies inside the rule; cannot sample.")
        pools.append((cols, rows))
    return pools


class _Sampler:
    """The simulated annealing of :func:`sample_counterfactuals`: candidates drawn from the
    pools, scored by the Isolation Forest (minus 2 off the rule's target), and every distinct
    candidate that keeps the constraints remembered with its score."""

    def __init__(self, state: FittedRules, x: np.ndarray, pools: list[tuple[list[int], np.ndarray]],
                 rng: np.random.Generator, target: Any, reach: Reach | None):
        self.state, self.x, self.pools, self.rng, self.target, self.reach = state, x, pools, rng, target, reach
        self.seen: dict[bytes, tuple[float, np.ndarray]] = {}

    def generate(self, cur: np.ndarray, k: int) -> np.ndarray:
        cand = np.repeat(cur[None], k, axis=0)
        for cols, rows in self.pools:
            pick = rows[self.rng.integers(0, len(rows), size=k)]
            cand[:, cols] = self.state.X[np.ix_(pick, np.asarray(cols, dtype=int))]
        return cand

    def score(self, C: np.ndarray) -> np.ndarray:
        s = self.state.isolation_ensemble.decision_function(C)
        if self.target is not None:
            s = s - 2.0 * ~output_mask(self.state.ensemble.predict(C), self.target)
        return s

    def remember(self, C: np.ndarray, s: np.ndarray) -> None:
        keep = _keeping(self.reach, self.x, C)
        for row, v in zip(C[keep], s[keep]):
            self.seen.setdefault(row.tobytes(), (float(v), row))

    def anneal(self, n: int, batch: int, max_iter: int, temp: float, patience: int) -> None:
        """From one draw, ``max_iter`` batches at most, moving to a batch's best by the
        Metropolis rule; stops once a plausible point is found, ``patience`` batches bring
        nothing better and ``n`` points are remembered."""
        cur = self.generate(self.x, 1)[0]
        cur_s = float(self.score(cur[None])[0])
        self.remember(cur[None], np.array([cur_s]))
        best_s, stall = cur_s, 0
        for i in range(max_iter):
            C = self.generate(cur, batch)
            s = self.score(C)
            self.remember(C, s)
            k = int(np.argmax(s))
            if s[k] > best_s:
                best_s, stall = float(s[k]), 0
            else:
                stall += 1
            if best_s > 0 and stall > patience and len(self.seen) >= n:
                break
            diff = float(s[k]) - cur_s
            t = temp / math.log(i + 2)
            if diff > 0 or self.rng.random() < math.exp(diff / t):
                cur, cur_s = C[k], float(s[k])


def _keeping(reach: Reach | None, x: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Which candidates keep the constraints (all of them without any)."""
    return np.ones(len(C), dtype=bool) if reach is None else reach.holds(np.repeat(x[None], len(C), axis=0), C)


def _least_move(reach: Reach, x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The row's least move into the rule that keeps the constraints, as the one sample."""
    ok, Z = reach.moves(x[None], lower, upper)
    if not ok[0]:
        raise NoCounterfactualRuleError("This row cannot reach the rule under the constraints between features "
                                        f"({'; '.join(reach.texts)}) with the other features kept.")
    return Z


def inlier(state: FittedRules, X: np.ndarray) -> np.ndarray:
    """The Isolation Forest's inlier verdict (decision_function >= 0)."""
    return state.isolation_ensemble.decision_function(np.atleast_2d(X)) >= 0


def evaluate(state: FittedRules, X: Rows, predict: Callable[[np.ndarray], np.ndarray],
             target_of: Callable[[Any], Any], *, fixed: Features = None, increase_only: Features = None,
             decrease_only: Features = None, progress: Callable[[int, int], None] | None = None,
             pi: float | None = None, pi_c: float | None = None, top_k: int | None = None,
             constraints: Constraints | None = None) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Local rules for the rows of ``X``, one sample each, and the paper's
    metrics; ``predict`` is the audited model, ``target_of(y)`` the target
    for a row whose model output is ``y``. Returns (metrics, per-row records).
    ``constraints``: each rule reachable and each sample keeping them (:func:`local_rule`,
    :func:`sample_counterfactuals`)."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(predict(X))
    X_cf = X.copy()
    in_t = np.zeros(len(X), dtype=bool)
    inl = np.zeros(len(X), dtype=bool)
    found = np.zeros(len(X), dtype=bool)
    records = []
    for i, x in enumerate(X):
        tgt = target_of(y[i])
        rec: dict[str, Any] = {"row": i, "target": tgt}
        try:
            rule = local_rule(state, x, tgt, fixed=fixed, increase_only=increase_only, decrease_only=decrease_only,
                              pi=pi, pi_c=pi_c, top_k=top_k, constraints=constraints)
            z = sample_counterfactuals(state, x, rule, n=1, constraints=constraints)[0]
        except NoCounterfactualRuleError as e:
            rec["note"] = str(e)
        else:
            X_cf[i], found[i] = z, True
            out = np.asarray(predict(z[None]))
            in_t[i] = bool(output_mask(out, tgt)[0])
            inl[i] = bool(inlier(state, z)[0])
            rec.update(size=len(rule.features), changed=int(np.sum(z != x)), cdp=rule.cdp, crp=rule.crp,
                       time=rule.elapsed, correct=bool(in_t[i]), inlier=bool(inl[i]), below_pi_c=rule.below_pi_c)
        records.append(rec)
        if progress:
            progress(i + 1, len(X))
    return rule_metrics(X, X_cf, in_t, inl, found), records
