"""What an answer guarantees: one small value every result carries.

Every analysis returns a result with a ``guarantee`` (:class:`Guarantee`), and
every page and export says it in words (:meth:`Guarantee.text`), so a reader
never has to guess whether a number is proven, checked or estimated. Gurobi
reports a status and a MIP gap with every solution; this is the same idea for
every analysis of the Atlas.

The kinds, strongest first:

``proven_optimal``
    An exact solver proved that no cheaper answer exists on the model itself
    (a tree ensemble's cell problem, a linear model's MILP). ``gap`` is 0.
``exact``
    Computed exactly from the model's own structure, with no optimisation
    claim (a tree ensemble's pure regions, a linear model's boundary).
``time_limited``
    Valid on the model, but the solver stopped before its proof: ``gap`` is
    the relative distance to the proven lower bound (``bound``).
``valid_on_model``
    Checked on the model itself (fed back, the target obtained); when it was
    found through a surrogate (``surrogate_fidelity`` set), it is optimal only
    for that surrogate, never claimed optimal for the model.
``estimated``
    A statistic estimated from data (a rule's accuracy, a probability estimated
    by a forest), with no claim beyond the rows it was measured on.
``infeasible``
    Proven that no answer exists under the constraints asked.
``not_found``
    Nothing valid was found; nothing is proven either way (a time limit, a
    search on a model that is not exact).

``model_kind`` says what was reasoned about: ``"tree_ensemble"`` (exact
representation), ``"linear"`` (exact), ``"black_box"`` (any other model, run
in a sandboxed worker; exact analyses run on a surrogate of it).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from core.errors import AtlasError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Guarantee", "GuaranteeKind", "ModelKind", "GUARANTEE_KINDS", "MODEL_KINDS", "guarantee_line",
           "with_guarantee"]

GuaranteeKind = Literal["proven_optimal", "exact", "time_limited", "valid_on_model", "estimated",
                        "infeasible", "not_found"]
ModelKind = Literal["tree_ensemble", "linear", "black_box"]
GUARANTEE_KINDS: tuple[str, ...] = ("proven_optimal", "exact", "time_limited", "valid_on_model", "estimated",
                                    "infeasible", "not_found")
MODEL_KINDS: tuple[str, ...] = ("tree_ensemble", "linear", "black_box")

_MODEL_WORDS = {"tree_ensemble": "the tree ensemble", "linear": "the linear model", "black_box": "the uploaded model"}


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


@dataclass(frozen=True)
class Guarantee:
    """What an answer guarantees, and about which model.

    Attributes
    ----------
    kind : one of :data:`GUARANTEE_KINDS` (see the module docstring).
    model_kind : one of :data:`MODEL_KINDS`.
    gap : relative gap to the proven lower bound (``time_limited``), else None
        (0.0 for ``proven_optimal``).
    bound : the proven lower bound on the cost, when one is known.
    surrogate_fidelity : share of held-out rows on which the surrogate the answer
        was found with agrees with the model (None: no surrogate was used).
    boundary_fidelity : the same agreement on points sampled near the model's
        decision boundary (None: not measured).
    note : one more sentence, in words (why nothing was found, what was estimated).
    """

    kind: GuaranteeKind
    model_kind: ModelKind = "tree_ensemble"
    gap: float | None = None
    bound: float | None = None
    surrogate_fidelity: float | None = None
    boundary_fidelity: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in GUARANTEE_KINDS:
            raise AtlasError(f"Unknown guarantee kind {self.kind!r}; expected one of {', '.join(GUARANTEE_KINDS)}.")
        if self.model_kind not in MODEL_KINDS:
            raise AtlasError(f"Unknown model kind {self.model_kind!r}; expected one of {', '.join(MODEL_KINDS)}.")
        for name in ("gap", "bound", "surrogate_fidelity", "boundary_fidelity"):
            object.__setattr__(self, name, _number_or_none(getattr(self, name)))
        for name in ("surrogate_fidelity", "boundary_fidelity"):
            v = getattr(self, name)
            if v is not None and not 0.0 <= v <= 1.0:
                raise AtlasError(f"{name} is {v}; a fidelity is a share between 0 and 1.")
        if self.kind == "proven_optimal":
            _check_provable(self)

    @property
    def proven(self) -> bool:
        """Is the answer proven (optimal, exact or proven infeasible) on the model itself?"""
        return self.kind in ("proven_optimal", "exact", "infeasible")

    @property
    def via_surrogate(self) -> bool:
        return self.surrogate_fidelity is not None

    def text(self) -> str:
        """The guarantee in one or two plain sentences (pages, reports, exports)."""
        words = _KIND_WORDS.get(self.kind, _nothing_words)(self, _MODEL_WORDS[self.model_kind], self._surrogate_words())
        return f"{words} {self.note}".strip()

    def _surrogate_words(self) -> str:
        """The surrogate the answer was found with, and its agreement with the model ("": none)."""
        if self.surrogate_fidelity is None:
            return ""
        surrogate = f"its surrogate (agreement with the model {_pct(self.surrogate_fidelity)} on held-out rows"
        if self.boundary_fidelity is not None:
            surrogate += f", {_pct(self.boundary_fidelity)} near the decision boundary"
        return surrogate + ")"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, with the words beside the fields (``text``)."""
        return {**asdict(self), "text": self.text()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Guarantee:
        fields = {k: d[k] for k in ("kind", "model_kind", "gap", "bound", "surrogate_fidelity", "boundary_fidelity",
                                     "note") if k in d}
        return cls(**fields)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, s: str) -> Guarantee:
        return cls.from_dict(json.loads(s))


def _number_or_none(v: Any) -> float | None:
    """A number of a guarantee as a float; NaN (not known) as None."""
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def _check_provable(g: Guarantee) -> None:
    """A proven optimum is about the model itself: never through a surrogate, never on a black box."""
    if g.surrogate_fidelity is not None:
        raise AtlasError("An answer found through a surrogate cannot be proven optimal for the model; "
                         "its guarantee is 'valid_on_model'.")
    if g.model_kind == "black_box":
        raise AtlasError("Nothing is proven optimal about a model that is not read exactly.")


# the words of each kind of guarantee: (guarantee, the model in words, its surrogate in words or "") -> text
def _proven_words(g: Guarantee, model: str, surrogate: str) -> str:
    return "Proven optimal (exact for a linear model)." if g.model_kind == "linear" else f"Proven optimal on {model}."


def _exact_words(g: Guarantee, model: str, surrogate: str) -> str:
    return f"Exact on {model}." if not surrogate else f"Exact on {surrogate}, not on the model itself."


def _time_limited_words(g: Guarantee, model: str, surrogate: str) -> str:
    gap = "an unknown gap" if g.gap is None or not math.isfinite(g.gap) else f"a gap of {_pct(g.gap)}"
    return f"Valid on {model}; not proven optimal: the solver stopped at its time limit with {gap}."


def _valid_words(g: Guarantee, model: str, surrogate: str) -> str:
    return (f"Valid on {model} (checked on it); optimal for {surrogate}, not proven optimal for the model."
            if surrogate else f"Valid on {model} (checked on it); not proven optimal.")


def _estimated_words(g: Guarantee, model: str, surrogate: str) -> str:
    return "Estimated from the data" + (f" with {surrogate}" if surrogate else "") + "; not proven."


def _infeasible_words(g: Guarantee, model: str, surrogate: str) -> str:
    return f"Proven: no answer exists on {model} under the constraints asked."


def _nothing_words(g: Guarantee, model: str, surrogate: str) -> str:
    return "Nothing valid was found; nothing is proven either way."


_KIND_WORDS: dict[str, Callable[[Guarantee, str, str], str]] = {
    "proven_optimal": _proven_words, "exact": _exact_words, "time_limited": _time_limited_words,
    "valid_on_model": _valid_words, "estimated": _estimated_words, "infeasible": _infeasible_words}


def guarantee_line(g: Guarantee | None, what: str = "this answer") -> str:
    """The one sentence every page, report and export says of an answer's guarantee:
    "What <what> guarantees: <Guarantee.text()>" (``what`` names the answer: "these
    rules", "this audit's recourses")."""
    if g is None:
        return f"What {what} guarantees: nothing is claimed of it."
    return f"What {what} guarantees: {g.text()}"


def with_guarantee(table: pd.DataFrame, g: Guarantee | None) -> pd.DataFrame:
    """A copy of an exported table (a DataFrame) with the guarantee as its last two
    columns, ``guarantee`` (the kind) and ``guarantee_text`` (in words), on every row:
    a CSV says what it guarantees wherever it is opened, and stays a plain table."""
    out = table.copy()
    out["guarantee"] = "" if g is None else g.kind
    out["guarantee_text"] = guarantee_line(g).split(": ", 1)[1]
    return out
