"""Feature schema: kinds, ranges, actionability, cost weights, protected flags.

A :class:`Schema` describes the model's input columns in model order. It is
inferred from data (:func:`infer_schema`), edited by the user (the app's
schema editor works on :meth:`Schema.to_frame` / :meth:`Schema.from_frame`),
saved and reloaded as JSON, and read by every analysis that needs to know
which features may move and how far.

Kinds: ``numerical`` (continuous), ``integer`` (integral values, ordered),
``binary`` (0/1), ``categorical`` (one column of category codes ``0..K-1``
naming the ``levels``, plus code ``K`` for a missing or unseen value: a
feature the model splits on by category sets), ``one-hot`` (one column of a
one-hot group; the group name is in ``group``; exactly one column of a group
is 1), ``ordinal`` (ordered integer codes). Actionability: ``free``,
``fixed``, ``increase`` (may only go up), ``decrease`` (may only go down);
a categorical feature is free or fixed. Schemas saved before categorical
features existed (version 1, where ``categorical`` meant a one-hot column)
are read with that kind renamed ``one-hot``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Sequence, TypedDict, Unpack, cast

import numpy as np
import pandas as pd

from core.constraints import constraint_lines, parse
from core.errors import SchemaError
from core.model.features import closest_names, feature_index, feature_indices, names_text, placeholder_names
from core.model.missing import indicator_of

if TYPE_CHECKING:
    from core.constraints import Constraints
    from core.model import TreeEnsemble

__all__ = ["FeatureSpec", "Schema", "infer_schema", "suggest_protected", "validate", "one_hot_encode",
           "with_missing_states", "KINDS", "ACTIONABILITY", "INTEGRAL_KINDS"]

KINDS = ("numerical", "integer", "binary", "categorical", "one-hot", "ordinal")
#: kinds that only take integer values
INTEGRAL_KINDS = ("integer", "ordinal", "binary", "categorical", "one-hot")
SCHEMA_VERSION = 2
ACTIONABILITY = ("free", "fixed", "increase", "decrease")
#: names that read like a protected attribute: only ever a suggestion (:func:`suggest_protected`)
_PROTECTED_HINTS = re.compile(r"^(sex|gender|race|ethnicity|ethnic|religion|nationality)$", re.I)
_ONE_HOT = re.compile(r"^(?P<group>[^=]+)=(?P<level>.+)$|^(?P<group2>.+)_(?P<level2>[^_]+)$")


@dataclass(frozen=True)
class FeatureSpec:
    """Settings of one input column."""

    name: str
    kind: str = "numerical"
    lower: float = 0.0
    upper: float = 1.0
    actionability: str = "free"
    weight: float = 1.0
    protected: bool = False
    group: str | None = None
    levels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.levels is not None:
            object.__setattr__(self, "levels", tuple(str(v) for v in self.levels))
        self._check_settings()
        self._check_levels()

    def _check_settings(self) -> None:
        """The kind and actionability are known names; the range and the weight are usable numbers."""
        if self.kind not in KINDS:
            raise SchemaError(f"Feature {self.name!r}: kind {self.kind!r} is not one of {KINDS}.")
        if self.actionability not in ACTIONABILITY:
            raise SchemaError(
                f"Feature {self.name!r}: actionability {self.actionability!r} is not one of {ACTIONABILITY}."
            )
        if not (np.isfinite(self.lower) and np.isfinite(self.upper)) or self.lower > self.upper:
            raise SchemaError(
                f"Feature {self.name!r}: range [{self.lower}, {self.upper}] must be finite with lower <= upper."
            )
        if not np.isfinite(self.weight) or self.weight < 0:
            raise SchemaError(f"Feature {self.name!r}: cost weight {self.weight} must be >= 0.")

    def _check_levels(self) -> None:
        """A one-hot column names its group; a categorical one lists its levels (and has no
        order to move along); no other kind lists levels."""
        if self.kind == "one-hot" and not self.group:
            raise SchemaError(f"Feature {self.name!r} is a one-hot column but names no one-hot group.")
        if self.kind == "categorical":
            if not self.levels:
                raise SchemaError(f"Feature {self.name!r} is categorical but lists no levels.")
            if self.actionability not in ("free", "fixed"):
                raise SchemaError(f"Feature {self.name!r} is categorical: it can be free or fixed, not "
                                  f"{self.actionability!r} (its categories have no order).")
        elif self.levels is not None:
            raise SchemaError(f"Feature {self.name!r} lists levels but is {self.kind}, not categorical.")

    @property
    def integral(self) -> bool:
        """Whether the feature takes integer values only (its kind is one of :data:`INTEGRAL_KINDS`)."""
        return self.kind in INTEGRAL_KINDS

    @property
    def span(self) -> float:
        """Range used to scale distances (1 for a constant column)."""
        return float(self.upper - self.lower) or 1.0


class FeatureChanges(TypedDict, total=False):
    """What :meth:`Schema.with_updates` may change of a feature: any of its settings but its name."""

    kind: str
    lower: float
    upper: float
    actionability: str
    weight: float
    protected: bool
    group: str | None
    levels: tuple[str, ...] | None


@dataclass(frozen=True)
class Schema:
    """Ordered feature settings, plus the target column's name if known, and the
    constraints between features the analyst wrote (``constraints``, one line of the
    language of :mod:`core.constraints` each: the text is what is kept and saved;
    it is read, and checked, when the schema is made).

    Examples
    --------
    >>> import pandas as pd
    >>> from core import infer_schema
    >>> schema = infer_schema(pd.DataFrame({"age": [30, 41], "income": [1.5, 2.0]}))
    >>> schema.with_updates("age", actionability="increase").features[0].actionability
    'increase'
    >>> schema.with_constraints("delta(age) >= 0").parsed_constraints().texts
    ['delta(age) >= 0']
    """

    features: tuple[FeatureSpec, ...]
    target: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    constraints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.features, (str, bytes, Mapping)) or not isinstance(self.features, Iterable):
            raise SchemaError(f"A Schema holds a sequence of FeatureSpec; got {type(self.features).__name__}. "
                              "Use infer_schema(table), or Schema([FeatureSpec('age', ...), ...]).")
        object.__setattr__(self, "features", tuple(self.features))
        wrong = [f for f in self.features if not isinstance(f, FeatureSpec)]
        if wrong:
            raise SchemaError(f"A Schema holds FeatureSpec objects; got {type(wrong[0]).__name__} {wrong[0]!r:.40}. "
                              "Use infer_schema(table), or Schema([FeatureSpec('age', ...), ...]).")
        names = [f.name for f in self.features]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SchemaError(f"Duplicate feature names in the schema: {dup}.")
        object.__setattr__(self, "constraints", constraint_lines(self.constraints))
        object.__setattr__(self, "_parsed", parse(self.constraints, self))    # not a field: asdict, eq, repr skip it

    # ------------------------------------------------------------ accessors
    @property
    def names(self) -> list[str]:
        return [f.name for f in self.features]

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, key: int | str) -> FeatureSpec:
        return self.features[self.index(key)]

    def index(self, key: int | str) -> int:
        """The index of a feature given by name or index (a SchemaError names the closest)."""
        return feature_index(self.names, key, error=SchemaError)

    def groups(self) -> dict[str, list[int]]:
        """One-hot groups: group name -> column indices."""
        out: dict[str, list[int]] = {}
        for i, f in enumerate(self.features):
            if f.kind == "one-hot" and f.group:        # always named (checked on construction)
                out.setdefault(f.group, []).append(i)
        return out

    def group_levels(self) -> dict[str, tuple[str, ...]]:
        """One-hot groups: group name -> the level each column stands for, in the
        order of :meth:`groups` (a column ``group=level`` or ``group_level`` stands
        for ``level``, any other for its own name, as the analyst's columns show them)."""
        names = self.names
        return {g: tuple(_level_of(names[i], g) for i in idx) for g, idx in self.groups().items()}

    def categorical(self) -> dict[int, tuple[str, ...]]:
        """Categorical features (one column of codes): index -> level names."""
        return {i: f.levels for i, f in enumerate(self.features)
                if f.kind == "categorical" and f.levels is not None}     # always listed (checked on construction)

    def protected(self) -> list[str]:
        return [f.name for f in self.features if f.protected]

    def by_actionability(self) -> dict[str, list[str]]:
        """The features' names under each actionability (``fixed``, ``increase``, ...,
        every one of :data:`ACTIONABILITY` present, possibly empty), in the schema's
        order: what a query's fixed / increase-only / decrease-only lists start from."""
        return {a: [f.name for f in self.features if f.actionability == a] for a in ACTIONABILITY}

    def parsed_constraints(self) -> Constraints:
        """The constraints read against this schema (read once, when it was made)."""
        return cast("Constraints", vars(self)["_parsed"])       # read on construction

    def with_constraints(self, texts: str | Iterable[str]) -> "Schema":
        """The schema with these constraints (one text split into lines, or a sequence
        of lines) in place of its own, checked: a line that cannot be read raises
        :class:`core.errors.ConstraintError` naming its line and column."""
        return replace(self, constraints=constraint_lines(texts))

    def with_updates(self, name: str, **changes: Unpack[FeatureChanges]) -> "Schema":
        """The schema with feature ``name``'s settings changed (kind, lower, upper,
        actionability, weight, protected, group, levels), checked."""
        i = self.index(name)
        settable = [f.name for f in fields(FeatureSpec) if f.name != "name"]
        unknown = [k for k in changes if k not in settable]
        if unknown:
            near = closest_names(unknown[0], settable, n=1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise SchemaError(f"A feature has no setting {unknown[0]!r}.{hint} Its settings are {settable}.")
        feats = list(self.features)
        feats[i] = replace(feats[i], **changes)
        return replace(self, features=tuple(feats))

    def arrays(self) -> dict[str, np.ndarray]:
        """Per-feature arrays for vectorised analyses."""
        return {
            "lower": np.array([f.lower for f in self.features], dtype=float),
            "upper": np.array([f.upper for f in self.features], dtype=float),
            "span": np.array([f.span for f in self.features], dtype=float),
            "weight": np.array([f.weight for f in self.features], dtype=float),
        }

    # ---------------------------------------------------------- round trips
    def to_dict(self) -> dict[str, Any]:
        feats = []
        for f in self.features:
            d = asdict(f)
            d["levels"] = None if f.levels is None else list(f.levels)
            feats.append(d)
        out: dict[str, Any] = {"version": SCHEMA_VERSION, "target": self.target, "features": feats}
        if self.constraints:            # without any, the file (and what hashes it) is as before constraints
            out["constraints"] = list(self.constraints)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Schema":
        try:
            feats = tuple(FeatureSpec(**f) for f in _feature_rows(d))
            constraints = d.get("constraints") or []       # older files have none
            if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
                raise SchemaError(f"The schema file's 'constraints' must be a list of lines of text; got "
                                  f"{constraints!r:.60}.")
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, SchemaError):
                raise

            raise SchemaError(
                f"Not a schema file: {exc}. Expected JSON with a 'features' list as saved by the app."
            ) from None
        return cls(feats, target=d.get("target"), constraints=tuple(constraints))

    @classmethod
    def from_json(cls, text: str | bytes) -> "Schema":
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SchemaError(f"The schema file is not valid JSON ({exc}).") from None
        if not isinstance(d, dict):
            raise SchemaError("The schema file must hold a JSON object with a 'features' list.")
        return cls.from_dict(d)

    def to_frame(self) -> pd.DataFrame:
        """One row per feature, for the app's schema editor (levels as text)."""
        rows = []
        for f in self.features:
            d = asdict(f)
            d["levels"] = "" if f.levels is None else ", ".join(f.levels)
            rows.append(d)
        return pd.DataFrame(rows)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, target: str | None = None, base: "Schema | None" = None) -> "Schema":
        """Settings edited in :meth:`to_frame` form; a categorical feature's levels
        and the constraints come from ``base`` (the schema the frame was made from),
        not from the table."""
        rows = df.to_dict(orient="records")
        feats = []
        levels = {f.name: f.levels for f in base.features} if base is not None else {}
        for r in rows:
            g = _group_cell(r.get("group"))
            name, kind = str(r["name"]), str(r["kind"])
            lv = levels.get(name)
            if kind == "categorical" and lv is None:
                raise SchemaError(f"Feature {name!r} cannot become categorical here: its categories are "
                                  "set by the model.")
            feats.append(FeatureSpec(name=name, kind=kind, lower=float(r["lower"]),
                                     upper=float(r["upper"]), actionability=str(r["actionability"]),
                                     weight=float(r["weight"]), protected=bool(r["protected"]), group=g,
                                     levels=lv if kind == "categorical" else None))
        return cls(tuple(feats), target=target, constraints=base.constraints if base is not None else ())


def _feature_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """A schema file's features, as of the current version (in version 1, "categorical"
    was the kind of one-hot columns)."""
    rows = [dict(f) for f in d["features"]]
    if int(d.get("version", 1)) < 2:
        for f in rows:
            if f.get("kind") == "categorical":
                f["kind"] = "one-hot"
    return rows


def _group_cell(g: Any) -> str | None:
    """The schema editor's group cell: None when empty (None, NaN or "")."""
    return None if g is None or (isinstance(g, float) and np.isnan(g)) or g == "" else str(g)


def _level_of(column: str, group: str) -> str:
    """The level a one-hot column stands for: its name after ``group=`` or
    ``group_``, else its whole name."""
    for sep in ("=", "_"):
        if column.startswith(group + sep):
            return column[len(group) + 1:]
    return column


def _detect_one_hot(df: pd.DataFrame, binary_cols: Sequence[str]) -> dict[str, list[str]]:
    """Groups of binary columns named ``prefix_level`` / ``prefix=level``
    where every row has exactly one 1."""
    cand: dict[str, list[str]] = {}
    for c in binary_cols:
        m = _ONE_HOT.match(str(c))
        if m:
            cand.setdefault(m.group("group") or m.group("group2"), []).append(c)
    out = {}
    for g, cols in cand.items():
        if len(cols) >= 2 and bool((df[cols].sum(axis=1) == 1).all()):
            out[g] = cols
    return out


def infer_schema(df: pd.DataFrame, target: str | None = None, *,
                 protected: Iterable[str] | None = None,
                 kinds: dict[str, str] | None = None,
                 groups: dict[str, list[str]] | None = None,
                 levels: dict[str, Sequence[Any]] | None = None) -> Schema:
    """Infer a schema from a numeric DataFrame.

    Parameters
    ----------
    df : DataFrame of shape (n_samples, n_columns); the target column, if
        named, is left out of the features.
    target : name of the target column, if present in ``df``.
    protected : columns (or one-hot groups) to flag as protected, each held
        fixed; none by default. No column is protected, fixed or directed because
        of its name: :func:`suggest_protected` proposes names for the analyst to
        confirm.
    kinds : explicit kinds for some columns (e.g. from a type row).
    groups : known one-hot groups (group name -> columns), e.g. from
        :func:`core.intake.io.prepare_data`; others are detected from column names
        ``group=level`` or ``group_level`` whose rows sum to one.
    levels : categorical features (column -> its categories), whose column
        holds codes.

    Examples
    --------
    >>> import pandas as pd
    >>> from core import infer_schema
    >>> df = pd.DataFrame({"age": [30, 41, 52], "owner": [0, 1, 1], "income": [1.5, 2.0, 3.25]})
    >>> [(f.name, f.kind) for f in infer_schema(df).features]
    [('age', 'integer'), ('owner', 'binary'), ('income', 'numerical')]
    """
    df, protected = _checked_table(df, target, protected, kinds, groups, levels)
    cols = [c for c in df.columns if c != target]
    names_of = _given_levels(levels, cols)
    kinds = {**(kinds or {}), **{c: "categorical" for c in names_of}}
    _refuse_text(df, cols)
    binary = [c for c in cols if df[c].dropna().isin([0, 1]).all() and c not in kinds]
    col_group = _column_groups(df, cols, binary, groups)
    prot = _protected_columns(protected, cols, col_group)
    seen = _Evidence(names_of, col_group, kinds, set(binary))
    return Schema(tuple(_inferred_feature(c, df[c], seen, c in prot) for c in cols), target=target)


class _Evidence(NamedTuple):
    """What :func:`infer_schema` knows of the columns beyond their values."""

    levels: dict[str, tuple[str, ...]]      # categorical column -> its categories
    group: dict[str, str]                   # one-hot column -> its group
    kinds: dict[str, str]                   # kinds given by the caller
    binary: set[str]                        # 0/1 columns of no given kind


def _refuse_text(df: pd.DataFrame, cols: list[Any]) -> None:
    """infer_schema reads numbers: text columns are encoded first."""
    non_num = [c for c in cols if not pd.api.types.is_numeric_dtype(df[c])]
    if non_num:
        raise SchemaError(
            f"Columns {non_num[:5]} are not numeric; encode them (one-hot for categories) first."
        )


def _given_levels(levels: dict[str, Sequence[Any]] | None, cols: list[Any]) -> dict[str, tuple[str, ...]]:
    """The categories given for the table's columns, as text."""
    return {c: tuple(str(v) for v in lv) for c, lv in (levels or {}).items() if c in cols}


def _protected_columns(protected: Iterable[str] | None, cols: list[Any], col_group: dict[Any, str]) -> set[Any]:
    """The columns protected: those named, and every column of a one-hot group named."""
    prot = set(protected or ())
    return prot | {c for c in cols if col_group.get(c) in prot}


def _column_groups(df: pd.DataFrame, cols: list[Any], binary: list[Any], groups: dict[str, list[str]] | None
                   ) -> dict[Any, str]:
    """One-hot column -> its group: the groups given (over the table's columns), and the
    groups detected among the other binary columns (:func:`_detect_one_hot`)."""
    known = _given_groups(groups, cols)
    in_known = {c for cs in known.values() for c in cs}
    found = {**_detect_one_hot(df, [c for c in binary if c not in in_known]),
             **{g: cs for g, cs in known.items() if len(cs) >= 1}}
    return {c: g for g, cs in found.items() for c in cs}


def _given_groups(groups: dict[str, list[str]] | None, cols: list[Any]) -> dict[str, list[str]]:
    """The one-hot groups given, each over the table's columns."""
    return {g: [c for c in cs if c in cols] for g, cs in (groups or {}).items()}


def _inferred_kind(c: Any, s: pd.Series, seen: _Evidence) -> str:
    """A column's kind: categorical, one-hot, as given, binary, integer or numerical, in that order."""
    if c in seen.levels:
        return "categorical"
    if c in seen.group:
        return "one-hot"
    if c in seen.kinds:
        return seen.kinds[c]
    if c in seen.binary:
        return "binary"
    if np.all(np.mod(s.to_numpy(), 1) == 0):
        return "integer"
    return "numerical"


def _inferred_feature(c: Any, column: pd.Series, seen: _Evidence, protected: bool) -> FeatureSpec:
    """One column's settings read from its values: kind, range (a categorical's codes
    0..K), protected ones held fixed."""
    s = column.astype(float)
    lo = float(s.min()) if len(s) else 0.0
    hi = float(s.max()) if len(s) else 1.0
    if c in seen.levels:
        lo, hi = 0.0, float(len(seen.levels[c]))
    return FeatureSpec(name=str(c), kind=_inferred_kind(c, s, seen), lower=lo, upper=hi,
                       actionability="fixed" if protected else "free",
                       protected=protected, group=seen.group.get(c), levels=seen.levels.get(c))


def suggest_protected(columns: Iterable[Any], groups: Mapping[str, Sequence[Any]] | None = None) -> dict[str, str]:
    """The columns whose name reads like a protected attribute (sex, gender, race,
    ethnicity, religion, nationality), each with the reason in words.

    Only a proposal for the analyst to confirm: nothing in the library applies it
    (:func:`infer_schema` and :func:`core.intake.workspace.build_workspace` mark
    protected only the columns they are given). ``groups`` (one-hot group ->
    its columns): a group is proposed once, by its own name, when that name reads
    like a protected attribute.

    Examples
    --------
    >>> suggest_protected(["age", "Sex", "income"])
    {'Sex': 'its name reads like a protected attribute (sex)'}
    >>> suggest_protected(["race=white", "race=other", "age"], groups={"race": ["race=white", "race=other"]})
    {'race': 'its name reads like a protected attribute (race)'}
    """
    if isinstance(columns, (str, bytes)):
        columns = [columns]
    if groups is not None and not isinstance(groups, Mapping):
        raise SchemaError(f"suggest_protected: groups is a dict (group -> its columns); got {type(groups).__name__}.")
    group_of = {str(c): str(g) for g, members in (groups or {}).items() for c in members}
    out: dict[str, str] = {}
    for c in columns:
        name = group_of.get(str(c), str(c))
        hint = _PROTECTED_HINTS.match(name.strip())
        if hint is not None and name not in out:
            out[name] = f"its name reads like a protected attribute ({hint.group(1).lower()})"
    return out


def _checked_table(df: Any, target: Any, protected: Any, kinds: Any, groups: Any, levels: Any
                   ) -> tuple[pd.DataFrame, Iterable[str] | None]:
    """infer_schema's arguments checked at the door (SchemaError saying what to give);
    ``protected`` as a list (one name stands for itself)."""
    _check_frame(df)
    feats = _feature_names(df, target)
    for what, given in (("kinds", kinds), ("groups", groups), ("levels", levels)):
        if given is not None and not isinstance(given, Mapping):
            raise SchemaError(f"infer_schema: {what} is a dict (column -> ...); got {type(given).__name__}.")
    for c in list(kinds or {}) + list(levels or {}):
        feature_index(feats, c, error=SchemaError, what="infer_schema: a key of kinds or levels")
    for g, members in (groups or {}).items():
        feature_indices(feats, members, error=SchemaError, what=f"infer_schema: one-hot group {g!r}")
    if protected is None:
        return df, None
    return df, _protected_names(feats, protected, groups)


def _check_frame(df: Any) -> None:
    """A DataFrame with columns and rows (the kinds and ranges are read from them)."""
    if not isinstance(df, pd.DataFrame):
        hint = (" Wrap it: pd.DataFrame(array, columns=[...names...])." if isinstance(df, (np.ndarray, list, tuple))
                else "")
        raise SchemaError(f"infer_schema reads a pandas DataFrame (its columns name the features); got "
                          f"{type(df).__name__}.{hint}")
    if df.shape[1] == 0:
        raise SchemaError("The table has no columns: give a DataFrame with one column per feature.")


def _feature_names(df: pd.DataFrame, target: Any) -> list[str]:
    """The table's feature columns as text: every column but the target (which must be one)."""
    cols = [str(c) for c in df.columns]
    if target is not None and target not in df.columns:
        near = closest_names(str(target), cols)
        hint = f" Did you mean {' or '.join(map(repr, near))}?" if near else ""
        raise SchemaError(f"The target column {target!r} is not in the table.{hint} Its columns are "
                          f"{names_text(cols)}; pass target=None when the table holds the features only.")
    feats = [c for c in cols if c != target]
    if not feats:
        raise SchemaError(f"The table has no feature columns besides the target {target!r}.")
    if len(df) == 0:
        raise SchemaError("The table has no rows: the features' kinds and ranges are read from the data. Give "
                          "at least one row.")
    return feats


def _protected_names(feats: list[str], protected: Any, groups: Any) -> list[str]:
    """The protected columns or one-hot groups named, each checked (a group given, or one
    read from the columns' names)."""
    known = feats + [str(g) for g in (groups or {})]
    known += [str(m.group("group") or m.group("group2")) for c in feats if (m := _ONE_HOT.match(c))]
    picked = feature_indices(known, protected, error=SchemaError, what="protected")
    return [known[j] for j in picked]


def with_missing_states(schema: Schema, ens: TreeEnsemble) -> Schema:
    """``schema`` (of the ensemble's own features) extended with the "is missing"
    columns of ``ens`` rewritten by :func:`core.model.missing.expand`, set as the
    app's workspace sets them: binary, cost weight 0, decrease-only (a missing
    value may get one, a value never becomes missing), fixed and protected with
    their feature."""
    states = indicator_of(ens)
    names = list(ens.feature_names)
    if schema.names == names:
        return schema
    if schema.names != names[:len(schema)] or len(schema) + len(states) != len(names):
        raise SchemaError("The schema's features do not match the model's features.")
    extra = [FeatureSpec(name=names[k], kind="binary", lower=0.0, upper=1.0, weight=0.0,
                         protected=schema.features[j].protected,
                         actionability="fixed" if schema.features[j].actionability == "fixed" else "decrease")
             for j, k in sorted(states.items(), key=lambda t: t[1])]
    return replace(schema, features=schema.features + tuple(extra))


def one_hot_encode(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """One-hot encode ``columns`` as ``col=level`` 0/1 columns, in place of each."""
    out = []
    for c in df.columns:
        if c in columns:
            levels = sorted(df[c].dropna().unique(), key=lambda v: (str(type(v)), v))
            for lv in levels:
                out.append(pd.Series((df[c] == lv).astype(np.int64), name=f"{c}={lv}"))
        else:
            out.append(df[c])
    return pd.concat(out, axis=1)


def validate(df: pd.DataFrame, ensemble: TreeEnsemble, target: str | None = None) -> pd.DataFrame:
    """Check that ``df`` fits the model and return its features in model order.

    The model's feature names are matched by name when the data has all of
    them; otherwise, when the model's names are generic (``f0``, ``x0``,
    ``Column_0``) and the column count matches, by position.

    Raises
    ------
    SchemaError
        Naming the missing, extra or non-numeric columns.
    """
    feats = [c for c in df.columns if c != target]
    X = _model_columns(df, feats, list(ensemble.feature_names))
    non_num = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    if non_num:
        raise SchemaError(f"Columns {non_num[:8]} are not numeric; the model needs numbers in every feature.")
    bad = X.isna().any(axis=1)
    if bad.any():
        raise SchemaError(
            f"{int(bad.sum())} rows have missing values (first at row {int(np.flatnonzero(bad)[0])}); "
            "impute or drop them before analysis."
        )
    return X


def _model_columns(df: pd.DataFrame, feats: list[Any], names: list[str]) -> pd.DataFrame:
    """The data's columns the model reads, by name, or by position when the model's names
    are generic and the counts match; refused naming what is missing or extra."""
    missing = [n for n in names if n not in feats]
    if not missing:
        return df[names]
    if not (placeholder_names(names) and len(feats) == len(names)):
        raise SchemaError(_missing_columns_text(missing, feats, names))
    return df[feats]


def _missing_columns_text(missing: list[str], feats: list[Any], names: list[str]) -> str:
    """What :func:`validate` says when the data lacks columns the model expects."""
    extra = [c for c in feats if c not in names]
    hint = (f" The data has {len(feats)} feature columns and the model expects {len(names)}."
            if len(feats) != len(names) else "")
    return (f"The model expects columns {missing[:8]}{' …' if len(missing) > 8 else ''} that the data "
            f"does not have{'; the data has unexpected columns ' + str(extra[:8]) if extra else ''}."
            f"{hint} Upload the data the model was trained on, or pick the right target column.")
