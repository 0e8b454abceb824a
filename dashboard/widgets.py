"""Widgets every analysis page shares: the row and the target outcome.

The chosen row and target are one choice for the whole app (and for the URL,
see :mod:`dashboard.share`): each page shows its own widget, kept in step with
the shared value through the widget's ``on_change``. The target defaults to an
outcome the row does not have (a classifier's first other class; for a
regressor the upper quartile of the predictions for a row below the median,
the lower quartile otherwise); a target the user chose stays chosen, and a
row that already has it is told so.
"""

from __future__ import annotations

from typing import Any, Callable, cast

import numpy as np
import streamlit as st

from core.audit.stats import protected_attributes
from core.counterfactual import already_at_target, default_target, favourable_default
from core.shown import approx_text, outcome_text
from dashboard import state
from dashboard.ui import plain

ROW = "shared_row"           # the row every page explains (int), None before any choice
TARGET = "shared_target"     # the target the user chose: a class, or (lo, hi) for a regressor; None = default
SHOWN = "shown_target"       # the target the last one-row page showed (chosen or default), for links


def _sync(widget_key: str, shared_key: str, convert: Callable[[Any], Any] = lambda v: v) -> Callable[[], None]:
    def copy() -> None:
        st.session_state[shared_key] = convert(st.session_state[widget_key])
    return copy


def share_row(row: int) -> None:
    """Make ``row`` the row every page explains (a case opened from an audit's list)."""
    st.session_state[ROW] = int(row)


def row_picker(container: Any, n_rows: int, key: str, *, default: int = 0, label: str = "Row") -> int:
    """The shared row, shown in ``container`` under the widget key ``key``."""
    shared = st.session_state.get(ROW)
    value = shared if isinstance(shared, (int, np.integer)) and 0 <= shared < n_rows else min(default, n_rows - 1)
    st.session_state[key] = int(value)
    return int(container.number_input(label, 0, max(n_rows - 1, 0), key=key, on_change=_sync(key, ROW, int)))


def target_picker(container: Any, ens: Any, pred: np.ndarray, row_pred: Any, prefix: str,
                  *, label: str = "Target outcome") -> Any:
    """The target outcome (``row_pred`` None: for many rows at once): a class of a classifier (widget ``{prefix}_target``), or
    ``(lo, hi)`` for a regressor (widgets ``{prefix}_lo``, ``{prefix}_hi``).

    Writes a caption when the row already has the chosen target.
    """
    picker = _class_picker if ens.is_classifier else _interval_picker
    target = picker(container, ens, pred, row_pred, prefix, label)
    if row_pred is not None:
        st.session_state[SHOWN] = target
    return target


def _class_picker(container: Any, ens: Any, pred: np.ndarray, row_pred: Any, prefix: str, label: str) -> Any:
    """A classifier's target class: the one chosen on any page, else the default other class."""
    key = f"{prefix}_target"
    chosen = st.session_state.get(TARGET)
    classes = list(ens.classes)
    by_text = {str(c): c for c in classes}
    if chosen is not None and str(chosen) in by_text:
        value = by_text[str(chosen)]
    else:
        value = default_target(ens, pred, row_pred)
    st.session_state[key] = value
    names = getattr(state.get(state.Keys.WORKSPACE), "class_names", None) or {}
    target = container.selectbox(label, classes, key=key, on_change=_sync(key, TARGET),
                                 format_func=lambda c: outcome_text(c, names))
    if row_pred is not None and already_at_target(ens, row_pred, target):
        container.caption(f"This row is already predicted {plain(outcome_text(target, names))}: there is "
                          "nothing to "
                          "change. "
                          "Choose another outcome, or another row.")
    return target


def _interval_picker(container: Any, ens: Any, pred: np.ndarray, row_pred: Any, prefix: str,
                     label: str) -> tuple[float, float]:
    """A regressor's target interval (lo, hi): the one chosen on any page, else the default quartile."""
    chosen = st.session_state.get(TARGET)
    if isinstance(chosen, tuple) and len(chosen) == 2:
        lo, hi = (float(v) for v in cast("tuple[float, float]", chosen))
    else:
        lo, hi = cast("tuple[float, float]", default_target(ens, pred, row_pred))   # a regressor's interval
    st.session_state[f"{prefix}_lo"], st.session_state[f"{prefix}_hi"] = lo, hi

    def keep() -> None:
        st.session_state[TARGET] = (float(st.session_state[f"{prefix}_lo"]), float(st.session_state[f"{prefix}_hi"]))

    c1, c2 = container.columns(2)
    lo = c1.number_input(f"{label}: prediction at least", key=f"{prefix}_lo", on_change=keep, format="%.4g")
    hi = c2.number_input("and at most", key=f"{prefix}_hi", on_change=keep, format="%.4g")
    if lo > hi:
        container.error("The lower end of the target is above the upper end: swap them.")
        st.stop()
    if row_pred is not None and already_at_target(ens, row_pred, (lo, hi)):
        container.caption(f"This row's prediction {approx_text(float(row_pred))} is already in the target: there is "
                          "nothing to change. Choose another interval, or another row.")
    return (float(lo), float(hi))


def favourable_picker(container: Any, ens: Any, pred: np.ndarray, prefix: str, *, label: str = "Favourable outcome",
                      sides: bool = False, reference: str = "the median") -> Any:
    """The favourable outcome of an analysis of many rows, defaulting to
    :func:`core.counterfactual.favourable_default`: a classifier's class (widget
    ``{prefix}_target``); for a regressor a prediction at least the median (said in a
    caption), or with ``sides`` at least / at most it (widget ``{prefix}_side``)."""
    ws = state.get(state.Keys.WORKSPACE)
    names = getattr(ws, "class_names", None) or {}
    from dashboard.share import kept_index  # share reads this module's keys: imported when drawn
    if ens.is_classifier:
        classes = list(ens.classes)
        return container.selectbox(label, classes, index=kept_index(f"{prefix}_target", classes,
                                                                     classes.index(favourable_default(ens, pred))),
                                   key=f"{prefix}_target", format_func=lambda c: outcome_text(c, names))
    above = True
    if sides:
        above = container.selectbox(label, [True, False], index=kept_index(f"{prefix}_side", [True, False]),
                                    key=f"{prefix}_side",
                                    format_func=lambda a: f"{'at least' if a else 'at most'} {reference} prediction")
    target = favourable_default(ens, pred, above=above)
    edge = cast("tuple[float, float]", target)[0] if above else cast("tuple[float, float]", target)[1]   # a regressor's favourable interval
    container.caption(f"Favourable: prediction {'at least' if above else 'at most'} {reference}, "
                      f"{plain(outcome_text(edge, names))}.")
    return target


def actionability_preset(schema: Any, names: list[str]) -> dict[str, list[str]]:
    """The model's features under each actionability of the feature settings (``fixed``,
    ``increase``, ``decrease``, ...), in the model's order: what a query or a fit starts from."""
    return {a: [n for n in names if n in set(listed)] for a, listed in schema.by_actionability().items()}


def column_picker(container: Any, label: str, schema: Any, default: list[str], key: str, *,
                  groups_too: bool = True, chosen: list[str] | None = None) -> list[str]:
    """A multiselect of the analyst's columns: a one-hot group (a categorical
    column read as one 0/1 column per category) is one option, named by its
    group, and stands for all its columns. Returns the model's feature names
    chosen. ``groups_too=False`` leaves the groups out (increase-only and
    decrease-only mean nothing for a category). ``default``: the model's feature
    names preset; ``chosen``: the options the analyst left picked (``share.kept``),
    drawn instead when given."""
    names = schema.names
    members = {g: [names[i] for i in idx] for g, idx in schema.groups().items()}
    in_group = {n: g for g, cols in members.items() for n in cols}
    options = _column_options(names, in_group, groups_too)
    chosen_default = ([o for o in options if o in chosen] if chosen is not None else
                      [o for o in options if all(c in default for c in members.get(o, [o]))])
    picked = container.multiselect(label, options, chosen_default, key=key)
    return [c for o in picked for c in members.get(o, [o])]


def _column_options(names: list[str], in_group: dict[str, str], groups_too: bool) -> list[str]:
    """The options of :func:`column_picker` in column order: each column, a one-hot group once by its name."""
    options: list[str] = []
    for n in names:
        option = in_group.get(n, n)
        if option not in options and (groups_too or n not in in_group):
            options.append(option)
    return options


def protected_picker(container: Any, schema: Any, key: str, help: str, chosen: list[str] | None = None) -> list[str]:
    """A multiselect of protected attributes: a one-hot group is one choice (named by its
    group), any other column its own; preset from the feature settings' protected flags,
    or ``chosen``, the choices the analyst left picked (``share.kept``)."""
    names = schema.names
    groups = {g: cols for g, cols in schema.groups().items() if len(cols) >= 2}
    in_group = {names[j] for cols in groups.values() for j in cols}
    choices = list(groups) + [n for n in names if n not in in_group]
    try:
        default = list(protected_attributes(schema)) if chosen is None else chosen
    except ValueError:
        default = []
    return container.multiselect("Protected attributes", choices, default=[d for d in default if d in choices],
                                 key=key, help=help)
