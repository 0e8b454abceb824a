"""Tables shown on the pages, made safe for Streamlit's Arrow transport in one place.

Streamlit sends every ``st.dataframe`` / ``st.table`` as an Arrow table. A column
that mixes numbers with text (the analyst's view of a row writes ``"missing"``
where a number is missing: ``56, "missing", 61``) has no Arrow type; Streamlit
then logs a traceback ("Could not convert 'missing' ... column income") and
turns the column into text itself. :func:`arrow_safe` does that conversion
first, quietly and in the app's own number style (:func:`core.shown.number_text`:
``8,256``, ``56``, ``missing``), for exactly the columns Arrow refuses; every
other column is passed on untouched. :func:`install` applies it to every table
the pages show (called once by ``dashboard/app.py``), so no page has to remember.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from core.shown import number_text

__all__ = ["arrow_safe", "install"]


def _text(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v) or v is pd.NA or v is pd.NaT:
        return "missing"
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        return number_text(v)
    return str(v)


def _refused(values: Any) -> bool:
    """True when Arrow cannot type these values (e.g. numbers mixed with text)."""
    import pyarrow as pa

    try:
        pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError, TypeError, OverflowError):
        return True
    return False


def _untyped(dtype: Any, values: Any) -> bool:
    """Objects that Arrow cannot type (only object columns may be refused)."""
    return bool(pd.api.types.is_object_dtype(dtype) and _refused(values))


def arrow_safe(data: Any) -> Any:
    """``data`` with each object column (and object index) that Arrow cannot type
    written as text; a DataFrame or Series that needs nothing, and anything else
    (a Styler, an array, a dict), is returned as it is."""
    if isinstance(data, pd.Series):
        return data.map(_text).astype(str) if _untyped(data.dtype, data) else data
    if not isinstance(data, pd.DataFrame):
        return data
    return _safe_frame(data)


def _safe_frame(data: pd.DataFrame) -> pd.DataFrame:
    """A table with its object columns and object index that Arrow cannot type written as text."""
    bad = [c for c, dt in zip(data.columns, data.dtypes) if _untyped(dt, data[c])]
    index_bad = _untyped(data.index.dtype, data.index.to_numpy())
    if not bad and not index_bad:
        return data
    out = data.copy()
    for c in bad:
        out[c] = out[c].map(_text).astype(str)
    if index_bad:
        out.index = pd.Index([_text(v) for v in out.index], name=out.index.name)
    return out


def install() -> None:
    """Route every ``st.dataframe`` and ``st.table`` (in the main area, columns,
    expanders, tabs) through :func:`arrow_safe`; idempotent."""
    import streamlit as st
    from streamlit.delta_generator import DeltaGenerator

    if getattr(DeltaGenerator, "_atlas_arrow_safe", False):
        return
    for name in ("dataframe", "table"):
        original = getattr(DeltaGenerator, name)

        def shown(self: Any, data: Any = None, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            return _original(self, arrow_safe(data), *args, **kwargs)

        shown.__doc__ = original.__doc__
        shown.__name__ = name
        setattr(DeltaGenerator, name, shown)
        setattr(st, name, getattr(st._main, name))     # st.dataframe was bound before the patch
    DeltaGenerator._atlas_arrow_safe = True  # type: ignore[attr-defined]
