"""The view in the URL: a link reproduces what its sender saw.

The URL carries, besides the page (its path), ``demo=<key>`` for a built-in
demo or ``ws=<token>`` for data and a model the sender kept on this server
with "Share this view" (the token is unguessable: whoever has the link can
open that data; on a team's server the link is private to whoever kept it until
they share it with the team, :func:`share_button`), ``row=<n>``, ``target=<class>`` or ``target=<lo>,<hi>``, and
``s=<JSON>``: the settings of the views (cost, fixed and increase/decrease-only
columns, time limits, plausibility, solver, audit, rules, FCCA and regions
settings; :data:`SETTINGS`) and the analyst's class names. A new session reads
them once (:func:`restore`) through one checked parser (:func:`read_link`: each
parameter once, of bounded length, numbers in ASCII digits, a known demo, a
token of the form this server makes, a JSON object of settings) and checks them
against the data (:func:`check_link`): a value malformed, or one this data or
page cannot take, is named on the page, never applied, never a traceback. Every
run writes the current ones back (:func:`publish`). The URL never sets a cluster
address or any other server setting.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from core.audit.history import link_refusal
from core.errors import AtlasError
from core.intake.demo import DEMOS
from core.jsonable import plain as json_ready
from core.optimal import BACKENDS
from dashboard import auth, state
from dashboard.caching import demo_workspace
from dashboard.history import owner, store
from dashboard.ui import plain
from dashboard.widgets import ROW, SHOWN, TARGET

RESTORED = "_url_restored"
PENDING = "_url_settings"    # the link's view settings, applied once the data is known
LINK_ERROR = "link_error"    # what was wrong with the link this session was opened from (shown on every page)
CHECK = "_url_check"         # row and target of the link, checked once the data is known
TOKEN = "share_token"        # (workspace key, token) of the last "Share this view"


#: the view settings a link carries: widget key -> (kind, arguments); see _setting_value
_LEVELS = {"pi": [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95], "pi_c": [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99]}
SETTINGS: dict[str, tuple] = {
    **{f"{p}_{k}": v for p in ("ocf", "ocb") for k, v in {
        "norm": ("choice", ["l1", "l0", "l2", "mix"]), "l0": ("float", 0.0, 100.0), "l1": ("float", 0.0, 100.0),
        "l2": ("float", 0.0, 100.0), "limit": ("float", 1.0, 600.0), "backend": ("choice", list(BACKENDS)),
        "plaus": ("bool",), "fixed": ("columns",), "inc": ("columns",), "dec": ("columns",)}.items()},
    "ocf_k": ("int", 1, 5), "ocb_from": ("class",), "ocb_to": ("class",), "ocb_n": ("int", 1, 5000),
    "fa_protected": ("columns",), "fa_target": ("class",), "fa_rows": ("int", 10, 20000),
    "fa_limit": ("float", 1.0, 120.0), "fa_perm": ("int", 200, 20000), "fa_boot": ("int", 100, 10000),
    "fa_alpha": ("choice", [0.01, 0.05, 0.1]), "fa_local": ("int", 0, 100), "fa_tcrex": ("bool",),
    "fa_jobs": ("int", 1, 8),
    "cr_pi": ("choice", _LEVELS["pi"]), "cr_pic": ("choice", _LEVELS["pi_c"]), "cr_topk": ("int", 1, 15),
    "cr_trees": ("int", 5, 200), "cr_depth": ("int", 2, 30), "cr_rows": ("int", 1000, 1_000_000),
    "cr_fixed": ("columns",), "cr_inc": ("columns",), "cr_dec": ("columns",),
    "mt_target": ("class",), "mt_side": ("choice", [True, False]),
    "mt_tau": ("choice", [0.8, 0.85, 0.9, 0.95, 0.99]), "mt_rho": ("choice", [0.005, 0.01, 0.02, 0.05, 0.1]),
    "mt_trees": ("int", 1, 10),
    "fcca_p0": ("float", 0.0, 1.0), "fcca_p1": ("float", 0.0, 1.0), "fcca_l0": ("float", 0.0, 10.0),
    "fcca_l1": ("float", 0.0, 10.0), "fcca_l2": ("float", 0.0, 10.0), "fcca_max": ("int", 10, 20000),
    "fcca_limit": ("float", 1.0, 120.0), "fcca_jobs": ("int", 1, 8), "fcca_method": ("choice", ["GOSDT (optimal)",
                                                                                                 "CART"]),
    "fcca_depth": ("choice", [1, 2, 3, 4]), "fcca_q": ("float", 0.0, 1.0), "fcca_run_limit": ("float", 5.0, 3600.0),
    "fcca_labels": ("choice", ["labels in the data", "the model's predictions"]), "cr_tree_depth": ("int", 1, 5),
    "ocb_jobs": ("int", 1, 8),
    "dr_fa": ("feature",), "dr_fb": ("feature",), "dr_mode": ("choice", ["slice", "projection"]),
    "dr_norm": ("choice", ["l2", "l1"]), "dr_max": ("int", 50, 20_000), "dr_radius": ("float", 1.0, 3.0),
    "cs_limit": ("float", 1.0, 600.0), "cs_rule": ("bool",),
    "cm_protected": ("columns",), "cm_target": ("class",), "cm_rows": ("int", 10, 5000),
    "cm_limit": ("float", 1.0, 120.0), "cm_jobs": ("int", 1, 8), "cm_fa": ("feature",), "cm_fb": ("feature",),
    "cm_max": ("int", 50, 20_000),
}
MAX_SETTINGS_TEXT = 8000     # characters of the s= parameter read at most
#: the parameters a link may carry: (what a message calls it, the characters it may hold at most)
PARAMS = {"demo": ("demo", 64), "ws": ("data token", 64), "row": ("row", 12), "target": ("target", 300),
          "s": ("settings", MAX_SETTINGS_TEXT)}
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")              # secrets.token_urlsafe, as the history store makes
_ROW = re.compile(r"[0-9]{1,9}")                          # ASCII digits only: "²", "١" or "１" pass isdigit()
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_INTERVAL = re.compile(rf"({_NUMBER}),({_NUMBER})")
_NUMBERISH = r"\s*[-+]?(?:[0-9.][0-9.eE+-]*|(?i:nan|inf|infinity))\s*"
_NUMERIC = re.compile(rf"{_NUMBERISH},{_NUMBERISH}")      # meant as an interval, but not a good one

log = logging.getLogger("atlas")


@dataclass(frozen=True)
class Link:
    """What a link asks for, every part checked (None: not asked for, or refused)."""
    demo: str | None = None
    ws: str | None = None
    row: int | None = None
    target: Any = None               # a class's text, or (lo, hi) with lo <= hi, both finite
    target_text: str | None = None   # the target as the link wrote it
    settings: dict | None = None


def _shown(value: str, most: int = 40) -> str:
    """A parameter's value quoted in a message, cut short."""
    return repr(value if len(value) <= most else value[:most] + "…")


def read_link(params: Mapping[str, Sequence[str]]) -> tuple[Link, list[str]]:
    """The link's parameters (name -> every value the URL gives it) checked: what it
    asks for, and a message for each part that is malformed (which is then not used).
    Parameters other than :data:`PARAMS` (Streamlit's own, e.g. ``embed``) are left alone."""
    problems: list[str] = []
    given = _given(params, problems)
    out: dict[str, Any] = {}
    for part in (_link_data, _link_row, _link_target, _link_settings):
        out.update(part(given, problems))
    return Link(**out), problems


def _given(params: Mapping[str, Sequence[str]], problems: list[str]) -> dict[str, str]:
    """Each known parameter the link gives once and not too long (the others said in ``problems``)."""
    given: dict[str, str] = {}
    for name, (called, most) in PARAMS.items():
        values = list(params.get(name, ()))
        if len(values) > 1:
            problems.append(f"The link gives its {called} ({name}=) {len(values)} times; a link gives it once.")
        elif values and len(values[0]) > most:
            problems.append(f"The link's {called} is {len(values[0]):,} characters long; it holds at most {most:,}.")
        elif values:
            given[name] = values[0]
    return given


def _link_data(given: dict[str, str], problems: list[str]) -> dict[str, Any]:
    """The data the link opens: a token of this server's form, else a demo this app has."""
    if "ws" in given:
        if _TOKEN.fullmatch(given["ws"]):
            return {"ws": given["ws"]}
        problems.append(f"The link's data token {_shown(given['ws'])} is not one this server makes.")
    elif "demo" in given:
        if given["demo"] in DEMOS:
            return {"demo": given["demo"]}
        problems.append(f"The link names a demo {_shown(given['demo'])} this app does not have.")
    return {}


def _link_row(given: dict[str, str], problems: list[str]) -> dict[str, Any]:
    """The link's row: ASCII digits only."""
    if "row" not in given:
        return {}
    text = given["row"]
    if _ROW.fullmatch(text):
        return {"row": int(text)}
    why = ("is negative" if text.startswith("-") else "is not a whole number" if "." in text
           else "is too large" if text.isascii() and text.isdigit() else "is not a row number")
    problems.append(f"The link's row {_shown(text)} {why}: a row is a number 0, 1, 2, … in the digits 0-9.")
    return {}


def _link_target(given: dict[str, str], problems: list[str]) -> dict[str, Any]:
    """The link's target: an interval of two finite numbers (the lower first), or a class's text."""
    text = given.get("target")
    if not text:
        return {}
    m = _INTERVAL.fullmatch(text)
    lo, hi = (float(m.group(1)), float(m.group(2))) if m else (math.nan, math.nan)
    if m and math.isfinite(lo) and math.isfinite(hi) and lo <= hi:
        return {"target": (lo, hi), "target_text": text}
    if _NUMERIC.fullmatch(text):
        problems.append(f"The link's target {_shown(text)} is not an interval of predictions (two finite "
                        "numbers, the lower first, as in 0.5,1.5).")
        return {}
    return {"target": text, "target_text": text}      # a class, matched by its text once the model is known


def _link_settings(given: dict[str, str], problems: list[str]) -> dict[str, Any]:
    """The view settings: one JSON object."""
    if not given.get("s"):
        return {}
    try:
        settings = json.loads(given["s"])
    except (ValueError, RecursionError):
        settings = None
    if isinstance(settings, dict):
        return {"settings": settings}
    problems.append("The link's settings are damaged (cut short or edited); the pages start from their "
                    "defaults.")
    return {}


def _bool_setting(value: Any, args: list[Any], ws: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError("is not true or false")
    return value


def _number(value: Any, lo: float, hi: float) -> Any:
    """A finite number in lo..hi (a boolean is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("is not a number")
    if not lo <= value <= hi:
        raise ValueError(f"is outside {lo}..{hi}")
    return value


def _int_setting(value: Any, args: list[Any], ws: Any) -> Any:
    value = _number(value, *args)
    if float(value) != int(value):
        raise ValueError("is not a whole number")
    return int(value)


def _float_setting(value: Any, args: list[Any], ws: Any) -> Any:
    return float(_number(value, *args))


def _choice_setting(value: Any, args: list[Any], ws: Any) -> Any:
    if value not in args[0]:
        raise ValueError("is not one of the choices")
    return value


def _class_setting(value: Any, args: list[Any], ws: Any) -> Any:
    if not ws.ensemble.is_classifier:
        raise ValueError("names a class, but this model predicts numbers")
    by_text = {str(c): c for c in ws.ensemble.classes}
    if str(value) not in by_text:
        raise ValueError("is not a class of this model")
    return by_text[str(value)]


def _feature_setting(value: Any, args: list[Any], ws: Any) -> Any:
    if value not in list(ws.ensemble.feature_names):
        raise ValueError("is not a feature of this model")
    return value


def _columns_setting(value: Any, args: list[Any], ws: Any) -> Any:
    known = set(ws.schema.names) | set(ws.schema.groups())
    if not isinstance(value, list) or not all(isinstance(v, str) and v in known for v in value):
        raise ValueError("names columns this data does not have")
    return list(dict.fromkeys(value))


#: how a link's value of each kind of setting (:data:`SETTINGS`) is read: (value, arguments, workspace)
_SETTING_KINDS: dict[str, Callable[[Any, list[Any], Any], Any]] = {"bool": _bool_setting, "int": _int_setting, "float": _float_setting, "choice": _choice_setting,
                  "class": _class_setting, "feature": _feature_setting, "columns": _columns_setting}


def _setting_value(key: str, value: Any, ws: Any) -> Any:
    """The link's ``value`` for widget ``key`` as that widget takes it, or raise
    ValueError saying why this data or page cannot take it."""
    kind, *args = SETTINGS[key]
    if kind not in _SETTING_KINDS:
        raise ValueError("is not a setting")
    return _SETTING_KINDS[kind](value, args, ws)


KEPT = "_kept_settings"      # {widget key: value} of the settings below, as last held or as a link gave them
#: {widget key: {workspace key: value}} of the settings that name columns, features or classes, as last
#: held on each of the last :data:`KEPT_WORKSPACES` workspaces
KEPT_DATA = "_kept_data_settings"
KEPT_WORKSPACES = 8
#: the settings kept across pages whatever the data: those whose choices do not depend on it
_KEPT_KINDS = ("bool", "int", "float", "choice")
#: the settings kept per workspace (its data and feature settings, :attr:`Workspace.key`): the
#: columns, the feature or the class a setting names mean nothing for other data, and new feature
#: settings preset them afresh (the one row's target, kept on every page, is ``TARGET``)
_DATA_KINDS = ("columns", "feature", "class")


def note_settings() -> None:
    """Note the value each kept setting's widget holds in this run (:func:`kept` gives it back).

    Streamlit forgets a widget's value once a run does not draw it, so an audit's row count or
    a time limit went back to its default whenever the analyst came back to its page. The page
    draws the widget again with the value noted as its default (:func:`kept`): never through
    session state, whose value reaches the browser only in the run that sets it (a widget drawn
    in a later run, e.g. once a result exists, then showed its default while the server read
    the value kept)."""
    noted = st.session_state.setdefault(KEPT, {})
    by_data = st.session_state.setdefault(KEPT_DATA, {})
    ws = state.get(state.Keys.WORKSPACE)
    for key, (kind, *_) in SETTINGS.items():
        if key not in st.session_state:
            continue
        if kind in _KEPT_KINDS:
            noted[key] = st.session_state[key]
        elif kind in _DATA_KINDS and ws is not None:
            held = by_data.setdefault(key, {})
            held.pop(ws.key, None)                       # the newest last: the oldest go first
            held[ws.key] = st.session_state[key]
            for old in list(held)[:-KEPT_WORKSPACES]:
                del held[old]


def kept(key: str, default: Any) -> Any:
    """The value of setting ``key`` as its widget last held it (or a link gave it), checked as a
    link's value is; else ``default``. A page gives it as the widget's default value."""
    if SETTINGS.get(key, ("",))[0] in _DATA_KINDS:
        return _kept_for_data(key, default)
    noted = (st.session_state.get(KEPT) or {})
    if key not in noted:
        return default
    try:
        return _setting_value(key, noted[key], None)
    except ValueError:
        return default


def _kept_for_data(key: str, default: Any) -> Any:
    """:func:`kept` for a setting naming columns, a feature or a class: as noted for the workspace
    shown now."""
    ws = state.get(state.Keys.WORKSPACE)
    held = (st.session_state.get(KEPT_DATA) or {}).get(key) or {}
    if ws is None or ws.key not in held:
        return default
    try:
        return _setting_value(key, held[ws.key], ws)
    except ValueError:
        return default


def kept_index(key: str, options: Sequence[Any], default: int = 0) -> int:
    """The position in ``options`` of setting ``key``'s kept value (:func:`kept`), else ``default``."""
    value = kept(key, None)
    return list(options).index(value) if value is not None and value in list(options) else default


def restore() -> None:
    """Apply the URL's data, row and target once per session (see :func:`read_link`)."""
    if st.session_state.get(RESTORED):
        return
    st.session_state[RESTORED] = True
    q = st.query_params
    link, problems = read_link({k: q.get_all(k) for k in q})
    for message in problems:
        _broken(message)
    try:
        _open_data(link)
    except AtlasError as exc:
        _broken(f"The link's data could not be opened: {exc}")
    except Exception as exc:  # noqa: BLE001 - a link never shows a traceback
        log.exception("a link's data could not be opened")
        _broken(f"The link's data could not be opened ({type(exc).__name__}).")
    if link.row is not None:
        st.session_state[ROW] = link.row
    if link.target is not None:
        st.session_state[TARGET] = link.target
    if link.settings is not None:
        st.session_state[PENDING] = link.settings
    st.session_state[CHECK] = link.target_text or True


def _open_data(link: Link) -> None:
    """Open the data the link names: the workspace kept under its token, or its demo."""
    if link.ws:
        ws = store().load_workspace(link.ws, owner=owner())
        state.put(state.Keys.WORKSPACE, ws)
        state.put(state.Keys.DEMO, None)
        st.session_state[TOKEN] = (ws.key, link.ws)
    elif link.demo:
        state.put(state.Keys.WORKSPACE, demo_workspace(link.demo))
        state.put(state.Keys.DEMO, link.demo)


def _broken(message: str) -> None:
    errors = st.session_state.get(LINK_ERROR) or []
    st.session_state[LINK_ERROR] = [*errors, message]


def check_link(ws: Any) -> None:
    """Once the data is known: a link's row or class that this data does not have is said, not
    silently replaced (the pages then show row 0 or the first other class)."""
    written = st.session_state.pop(CHECK, False)
    if not written or ws is None:
        return
    _check_row(ws)
    if st.session_state.get(TARGET) is not None and isinstance(written, str):  # the link's own target, as written
        _check_target(ws, written)
    refused = _apply_settings(ws)
    if refused:
        _broken(f"These settings of the link were not applied: {'; '.join(refused[:8])}"
                f"{'…' if len(refused) > 8 else ''}.")


def _check_row(ws: Any) -> None:
    row = st.session_state.get(ROW)
    if row is not None and not 0 <= row < len(ws.X):
        _broken(f"The link's row {row} is not in this data (rows 0 to {len(ws.X) - 1}).")
        st.session_state[ROW] = None


def _check_target(ws: Any, written: str) -> None:
    """The link's target as this model takes it: one of its classes by text, or an interval."""
    if ws.ensemble.is_classifier:
        classes = {str(c): c for c in ws.ensemble.classes}
        if written in classes:
            st.session_state[TARGET] = classes[written]
            return
        _broken(f"The link's target {_shown(written)} is not a class of this model "
                f"({', '.join(map(str, ws.ensemble.classes))}).")
        st.session_state[TARGET] = None
    elif not isinstance(st.session_state.get(TARGET), tuple):
        _broken(f"The link's target {_shown(written)} is not an interval of predictions (two numbers, the "
                "lower first, as in 0.5,1.5).")
        st.session_state[TARGET] = None


def _apply_settings(ws: Any) -> list[str]:
    """Apply the link's class names and view settings; what was refused, and why."""
    refused = []
    pending = dict(st.session_state.pop(PENDING, None) or {})
    names = pending.pop("class_names", None)
    if names is not None:
        try:
            if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
                raise AtlasError("they are not a list of class names")
            state.put(state.Keys.WORKSPACE, ws.with_class_names(names))
        except AtlasError as exc:
            refused.append(f"class_names ({exc})")
    for key, value in pending.items():
        if key not in SETTINGS:
            refused.append(f"{key} (not a setting of this app)")
            continue
        try:
            if SETTINGS[key][0] in _KEPT_KINDS:     # drawn with it as the default (see note_settings)
                st.session_state.setdefault(KEPT, {})[key] = _setting_value(key, value, ws)
            else:
                st.session_state[key] = _setting_value(key, value, ws)
        except ValueError as exc:
            refused.append(f"{key} = {json.dumps(value)[:40]} ({exc})")
    return refused


def link_notice() -> None:
    """On every page, until dismissed: what the link this session was opened from got wrong."""
    errors = st.session_state.get(LINK_ERROR)
    if not errors:
        return
    shown = "demo" if state.get(state.Keys.DEMO) else "data loaded"
    st.error("This link could not be followed as sent: " + " ".join(plain(e) for e in errors)
             + f" The {shown} is shown instead; ask the sender for a new link.")
    if st.button("Dismiss", key="link_error_dismiss"):
        st.session_state[LINK_ERROR] = None
        st.rerun()


def current_params() -> dict[str, str]:
    """What the URL should carry now."""
    ws = state.get(state.Keys.WORKSPACE)
    out = _data_param(ws)
    row = st.session_state.get(ROW)
    if row is not None:
        out["row"] = str(int(row))
    target = _target_param()
    if target is not None:
        out["target"] = target
    noted = st.session_state.get(KEPT) or {}
    settings = {k: json_ready(st.session_state[k] if k in st.session_state else noted[k]) for k in SETTINGS
                if k in st.session_state or k in noted}
    if ws is not None and ws.class_names:
        settings["class_names"] = dict(ws.class_names)
    if settings:
        out["s"] = json.dumps(settings, separators=(",", ":"), sort_keys=True, default=str)
    return out


def _data_param(ws: Any) -> dict[str, str]:
    """The demo shown, or the token of the data kept for this workspace."""
    demo = state.get(state.Keys.DEMO)
    token = st.session_state.get(TOKEN)
    if demo:
        return {"demo": demo}
    if ws is not None and token and token[0] == ws.key:
        return {"ws": token[1]}
    return {}


def _target_param() -> str | None:
    """The target as the URL writes it: an interval as two exact numbers, a class as its text."""
    target = st.session_state.get(TARGET)
    if target is None:                     # the default the page showed, so the link opens on the same target
        target = st.session_state.get(SHOWN)
    if isinstance(target, tuple):
        return f"{float(target[0])!r},{float(target[1])!r}"
    return None if target is None else str(target)


def publish() -> None:
    """Write the current view into the URL (keys no longer in use are removed)."""
    want = current_params()
    q = st.query_params
    for k in [k for k in q if k in ("demo", "ws", "row", "target", "s") and k not in want]:
        del q[k]
    for k, v in want.items():
        if q.get(k) != v:
            q[k] = v


#: the button that keeps a view, and what it does: on a team's server (True) or an open one
_SHARE_LABELS = {
    True: ("Keep this view", "Keeps this data and model on the server so that the address in your browser "
           "opens this view; only you can open it until you share it with the team."),
    False: ("Share this view", "Keeps this data and model on the server so that the address in your "
            "browser opens this view; anyone with the link can open them.")}


def share_button() -> None:
    """Sidebar control: keep uploaded data for a link (a demo's link needs nothing kept). On a
    team's server the link is private to whoever kept it until they share it with the team."""
    ws = state.get(state.Keys.WORKSPACE)
    if ws is None or state.get(state.Keys.DEMO):
        st.caption("The address in your browser links to this view.")
        return
    refused = link_refusal(ws)
    if refused is not None:
        st.caption(plain(refused))
        return
    author = auth.current()
    token = st.session_state.get(TOKEN)
    if token and token[0] == ws.key:
        if author is None:
            st.caption("The address in your browser links to this view (data and model kept on this server).")
        else:
            _team_link(token[1], author)
        return
    label, why = _SHARE_LABELS[author is not None]
    if st.button(label, key="share_view", help=why):
        try:
            st.session_state[TOKEN] = (ws.key, store().save_workspace(ws, owner=owner()))
            publish()
            st.success("The address in your browser now links to this view.")
        except AtlasError as exc:
            st.error(plain(exc))
            return
        if author is not None:
            _team_link(st.session_state[TOKEN][1], author)


def _team_link(token: str, author) -> None:
    """A kept view's link on a team's server: its author shares it or makes it private again."""
    try:
        mine, shared = store().workspace_owner(token, owner=author)
        if not mine:
            st.caption("The address in your browser links to this view, shared with the team by a colleague.")
            return
        on = st.toggle("Shared with the team", value=shared, key="share_team",
                       help="Every signed-in colleague can open this link (read-only: their changes stay in "
                            "their own session). Off: only you can.")
        if on != shared:
            store().share_workspace(token, owner=author, shared=on)
        st.caption("Every signed-in colleague can open the address in your browser." if on
                   else "Only you can open the address in your browser.")
    except AtlasError as exc:
        st.caption(plain(exc))
