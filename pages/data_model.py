"""Data & model: load a dataset and a model (or a demo), check them, edit the schema."""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from core.constraints import examples, problems
from core.intake import io
from core.intake.csvsafe import to_csv
from core.intake.demo import DEMOS
from core.intake.parsing.onnx_graph import keep_outputs, output_names
from core.intake.workspace import PositionalMatchRequired, build_workspace
from core.schema import ACTIONABILITY, KINDS, Schema, suggest_protected
from dashboard import state
from dashboard.caching import demo_workspace, session_model, session_table
from dashboard.deploy import settings as deployment
from dashboard.ui import download, plain, user_errors

K = state.Keys
#: how the model's library is named to the analyst
LIBRARIES = {"sklearn": "scikit-learn", "xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost",
             "onnx": "ONNX"}


def _proposed(ws):
    """``ws`` with the columns whose name reads like a protected attribute marked protected
    (and held fixed): the app's proposal, shown on this page with its reason for the analyst
    to untick; the library itself marks nothing by name."""
    reasons = suggest_protected([c.name for c in ws.columns])
    state.put(K.PROPOSED_PROTECTED, {"fingerprint": ws.fingerprint, "reasons": reasons} if reasons else None)
    return ws.with_protected(list(reasons)) if reasons else ws


def _proposal_text(ws) -> str | None:
    """The proposal still in force on ``ws`` (columns still protected), in words, or None."""
    held = state.get(K.PROPOSED_PROTECTED)
    if not held or held["fingerprint"] != ws.fingerprint:
        return None
    still = [c for c in ws.columns if c.name in held["reasons"]
             and all(ws.schema.features[j].protected for j in c.features)]
    if not still:
        return None
    parts = "; ".join(f"“{plain(c.name)}”, because {plain(held['reasons'][c.name])}" for c in still)
    it = "it" if len(still) == 1 else "them"
    return (f"Proposed as protected (and held fixed in counterfactuals): {parts}. Untick {it} (and set "
            f"{'its' if len(still) == 1 else 'their'} actionability) in the feature settings if that is wrong.")


AUTO_OUTPUT = "(the label and probabilities the graph names)"


def _onnx_output(model_file) -> str | None:
    """For an ONNX graph with several outputs, the one the analyst picks to analyse (None:
    let the reader take its label and probabilities, refusing when they are not clear)."""
    if model_file is None or not model_file.name.lower().endswith(".onnx"):
        return None
    with user_errors("The ONNX file's outputs could not be read"):
        outs = output_names(model_file.getvalue(), model_file.name)
        if len(outs) > 1:
            names = [n for n, _ in outs]
            kinds = dict(outs)
            pick = st.selectbox("Output to analyse (this graph has several)", [AUTO_OUTPUT] + names,
                                key="dm_onnx_output", format_func=lambda n: n if n == AUTO_OUTPUT
                                else f"{n} ({kinds[n]})",
                                help="A label output, or scores (probabilities, or a regressor's value). "
                                     "Leave the first choice when the graph names its label and probabilities.")
            return None if pick == AUTO_OUTPUT else pick
    return None


def _model_bytes(model_file, output: str | None) -> bytes:
    """The model file as loaded: an ONNX graph with only the chosen output kept."""
    data = model_file.getvalue()
    return data if output is None else keep_outputs(data, output, model_file.name)


def _load_upload(table, target, data_file, raw, model_file, trust, drop_missing, *, confirm: bool,
                 output: str | None = None) -> None:
    """Build the workspace from the uploaded files; a model without feature names
    waits for the user to confirm the positional mapping."""
    with user_errors("The model could not be loaded"):
        mraw = _model_bytes(model_file, output)
        model = session_model(mraw, model_file.name, trust)
        try:
            ws = build_workspace(table, target, model, name=f"{data_file.name} · {model_file.name}",
                                 data_sha256=io.sha256(raw), model_sha256=io.sha256(mraw),
                                 drop_missing=drop_missing, model_info={"origin": model_file.name},
                                 confirm_positions=confirm)
            ws = _proposed(ws)
        except PositionalMatchRequired as exc:
            state.put(K.PENDING_MAPPING, {"mapping": exc.mapping, "message": str(exc),
                                          "key": (io.sha256(raw), io.sha256(mraw), target)})
            st.rerun()
        state.put(K.WORKSPACE, ws)
        state.put(K.DEMO, None)
        state.put(K.LAST_NOTICE, f"Loaded {data_file.name} and {model_file.name}.")
        st.rerun()


def _notices() -> None:
    """The message of the last load (an error or a notice), shown once."""
    if state.get(K.LAST_ERROR):
        st.error(plain(state.get(K.LAST_ERROR)))
        state.put(K.LAST_ERROR, None)
    if state.get(K.LAST_NOTICE):
        st.success(plain(state.get(K.LAST_NOTICE)))
        state.put(K.LAST_NOTICE, None)


def _demo() -> None:
    keys = list(DEMOS)
    current = state.get(K.DEMO)
    choice = st.selectbox("Demo", keys, index=keys.index(current) if current in keys else 0,
                          format_func=lambda k: DEMOS[k].title, key="dm_demo")
    st.caption(DEMOS[choice].description)
    if st.button("Load demo", key="dm_load_demo", disabled=choice == current):
        with user_errors("The demo could not be loaded"):
            state.put(K.WORKSPACE, demo_workspace(choice))
            state.put(K.PROPOSED_PROTECTED, None)
            state.put(K.DEMO, choice)
            state.put(K.LAST_NOTICE, f"Loaded the demo “{DEMOS[choice].title}”.")
            st.rerun()


def _upload() -> None:
    """A data file, its target column, and a model uploaded or trained here."""
    data_file = st.file_uploader("Data (CSV or Parquet)", type=["csv", "tsv", "txt", "parquet", "pq", "gz", "bz2", "xz",
                                                                "zip"], key="dm_data_file")
    table = None
    if data_file is not None:
        raw = data_file.getvalue()
        with user_errors("The data file could not be read"):
            table = session_table(raw, data_file.name)
            st.caption(f"{plain(data_file.name)}: {len(table):,} rows × {table.shape[1]} columns.")
    if table is None:
        return
    cols = list(table.columns)
    target = st.selectbox("Target column (the label the model predicts)", cols,
                          index=cols.index(io.target_column_guess(table)), key="dm_target")
    drop_missing = st.checkbox("Drop rows with missing values", value=False, key="dm_drop_missing")
    how = st.radio("Model", ["Upload a model file", "Train a model here"], horizontal=True, key="dm_how")
    if how == "Upload a model file":
        _upload_model(table, target, data_file, raw, drop_missing)
    else:
        _train_model(table, target, data_file, raw, drop_missing)


def _upload_model(table, target, data_file, raw, drop_missing) -> None:
    dep = deployment()
    model_file = st.file_uploader(
        "Model file: XGBoost .json/.ubj, LightGBM .txt, scikit-learn .skops, CatBoost .json/.cbm, ONNX .onnx"
        + (" (or .pkl/.joblib)" if dep.allows_pickle else ""),
        type=["json", "ubj", "txt", "skops", "cbm", "onnx"] + (["pkl", "pickle", "joblib"] if dep.allows_pickle else []),
        key="dm_model_file")
    if model_file is not None:   # what the server holds: a file still uploading is not here yet
        st.caption(f"{plain(model_file.name)}: {model_file.size:,} bytes received. Load reads it.")
    trust = dep.allows_pickle and st.checkbox("I trust this file (allow pickle/joblib)", value=False,
                                              key="dm_trust")
    if trust:
        st.warning(io.PICKLE_WARNING)
    output = _onnx_output(model_file)
    if st.button("Load data and model", key="dm_load", disabled=model_file is None):
        state.put(K.PENDING_MAPPING, None)
        _load_upload(table, target, data_file, raw, model_file, trust, drop_missing, confirm=False, output=output)
    pending = state.get(K.PENDING_MAPPING)
    try:
        chosen = _model_bytes(model_file, output) if model_file is not None else b""
    except ValueError:          # an output that cannot be the prediction: loading says why
        chosen = b""
    if pending and model_file is not None and pending["key"] == (io.sha256(raw), io.sha256(chosen), target):
        st.warning(plain(pending["message"]))
        st.dataframe(pd.DataFrame(pending["mapping"], columns=["model feature", "data column"]),
                     hide_index=True, height=min(400, 36 + 35 * len(pending["mapping"])),
                     key="dm_mapping")
        c1, c2 = st.columns(2)
        if c1.button("The mapping is right: load", key="dm_confirm_positions", type="primary"):
            state.put(K.PENDING_MAPPING, None)
            _load_upload(table, target, data_file, raw, model_file, trust, drop_missing, confirm=True, output=output)
        if c2.button("Cancel", key="dm_cancel_positions"):
            state.put(K.PENDING_MAPPING, None)
            st.rerun()


def _train_model(table, target, data_file, raw, drop_missing) -> None:
    with st.form("dm_train"):
        c1, c2, c3, c4 = st.columns(4)
        family = c1.selectbox("Family", io.FAMILIES, key="dm_family")
        n_est = c2.number_input("Trees", 1, 2000, 100, key="dm_trees")
        depth = c3.number_input("Max depth", 1, 16, 5, key="dm_depth")
        lr = c4.number_input("Learning rate (boosting)", 0.001, 1.0, 0.1, key="dm_lr")
        go = st.form_submit_button("Train and load", key="dm_train_go")
    if go:
        with user_errors("The model could not be trained"), st.spinner("Training…"):
            prep = io.prepare_data(table, target, drop_missing=drop_missing)
            assert prep.y is not None                # a target was named, so its column was read
            tm = io.train_model(prep.X, prep.y, family, n_estimators=int(n_est),
                                max_depth=int(depth), learning_rate=float(lr))
            ws = build_workspace(table, target, tm.model, name=f"{data_file.name} · {family}",
                                 data_sha256=io.sha256(raw), drop_missing=drop_missing,
                                 model_info={f"held-out {tm.metric}": round(tm.holdout_score, 4),
                                             "origin": "trained here", **tm.params})
            state.put(K.WORKSPACE, _proposed(ws))
            state.put(K.DEMO, None)
            state.put(K.LAST_NOTICE, f"Trained a {family} model: held-out {tm.metric} "
                                     f"{tm.holdout_score:.3f}.")
            st.rerun()


def _summary(ws) -> None:
    """The model's figures, its details and the workspace's notes."""
    st.divider()
    st.subheader(plain(ws.name))
    summary = ws.summary()
    m = st.columns(5)
    lib, _, cls = summary["family"].partition(".")
    m[0].metric("Model", plain(LIBRARIES.get(lib, lib)), help=plain(cls or None))
    if ws.model_kind == "tree_ensemble":
        m[1].metric("Trees", summary["trees"])
        m[2].metric("Max depth", summary["max depth"])
        m[3].metric("Leaves", f"{summary['leaves']:,}")
    else:
        m[1].metric("Kind", "Linear" if ws.model_kind == "linear" else "Any other",
                    help="Read exactly: optimal counterfactuals proven on the model itself."
                    if ws.model_kind == "linear" else "Run in a sandboxed process; every answer shown is checked on it.")
        m[2].metric("Surrogate agreement", f"{100 * ws.surrogate.fidelity:.1f}%",
                    help="Share of held-out rows on which the tree-ensemble surrogate (used by the analyses that "
                         "need one) answers as the model does.")
        m[3].metric("Near the boundary", "–" if ws.surrogate.boundary_fidelity is None
                    else f"{100 * ws.surrogate.boundary_fidelity:.1f}%",
                    help="The same agreement on points sampled near the model's decision boundary.")
    acc = next((v for k, v in summary.items() if k.startswith(("accuracy", "R²"))), None)
    m[4].metric("Accuracy on data" if ws.ensemble.is_classifier else "R² on data",
                "–" if acc is None else f"{acc:.3f}")
    with st.expander("Model details"):
        st.json(summary)
    for note in ws.notes:
        st.info(plain(note))


def _data(ws) -> None:
    """The data's shape, its missing values and a preview with the predictions."""
    n_columns = len(ws.columns)
    st.markdown(f"**Data** · {len(ws.X):,} rows × {n_columns} columns"
                + (f" (the model reads {ws.X.shape[1]} features)" if n_columns != ws.X.shape[1] else "")
                + f" · target {plain(ws.target)}"
                + (" · shown in the model's raw columns"
                   if list(ws.to_raw(ws.X.head(1)).columns) != list(ws.X.columns) else ""))
    if ws.missing_counts:
        st.markdown(f"**Missing values** · {ws.rows_with_missing:,} of {len(ws.X):,} rows have one · "
                    + ", ".join(f"{plain(c)}: {n:,}" for c, n in ws.missing_counts.items()))
    preview = ws.analyst_view(ws.X.head(200), list(range(min(200, len(ws.X)))))
    if ws.y is not None:
        preview.insert(0, ws.target, ws.y.head(200).to_numpy())
    preview.insert(1 if ws.y is not None else 0, "prediction", ws.predictions[:200])
    if ws.class_names:
        preview.insert(2 if ws.y is not None else 1, "predicted outcome",
                       [ws.outcome_text(p) for p in ws.predictions[:200]])
    st.dataframe(preview, height=260, key="dm_preview")


def _class_names(ws) -> None:
    with st.expander("Class names" + (f" · {plain(', '.join(ws.outcome_text(c) for c in ws.ensemble.classes))}"
                                      if ws.class_names else "")):
        st.caption("Name the model's outcomes as your audience reads them (e.g. 0 = refused, 1 = approved): "
                   "every page, the case story and the audit report use these names. Leave a name blank to "
                   "show the class as it is.")
        if state.get(K.CLASS_NAMES_OF) != ws.fingerprint:   # another model: not the last one's names
            state.forget_widgets("dm_class_")
            state.put(K.CLASS_NAMES_OF, ws.fingerprint)
        with st.form("dm_class_names"):
            given = {str(c): st.text_input(f"Class {plain(c)}", ws.class_names.get(str(c), ""), key=f"dm_class_{i}",
                                           max_chars=60)
                     for i, c in enumerate(ws.ensemble.classes)}
            if st.form_submit_button("Apply class names"):
                with user_errors("The class names were not applied"):
                    state.put(K.WORKSPACE, ws.with_class_names(given))
                    state.put(K.LAST_NOTICE, "Class names applied.")
                    st.rerun()


def _feature_settings(ws) -> None:
    st.subheader("Feature settings")
    st.caption("Kind, range, actionability (free, fixed, increase-only, decrease-only), cost weight and "
               "protected flag of each feature. Analyses read these settings.")
    proposal = _proposal_text(ws)
    if proposal:
        st.warning(proposal)
    if any(c.missing is not None for c in ws.columns):
        st.caption("A feature named \"… is missing\" is 1 where that column's value is missing. Decrease-only (the "
                   "default) lets a counterfactual give it a value, never take one away; fixed keeps missing values "
                   "missing. Its weight is the price of giving a value, on top of the move from the column's median "
                   "(0 by default).")
    with st.form("dm_schema"):
        edited = st.data_editor(
            ws.schema.to_frame(), hide_index=True, disabled=["name", "group"], key="dm_schema_editor",
            column_config={
                "kind": st.column_config.SelectboxColumn("kind", options=list(KINDS), required=True),
                "actionability": st.column_config.SelectboxColumn("actionability", options=list(ACTIONABILITY),
                                                                  required=True),
                "weight": st.column_config.NumberColumn("weight", min_value=0.0, step=0.1),
                "protected": st.column_config.CheckboxColumn("protected"),
            })
        if st.form_submit_button("Apply settings"):
            with user_errors("The settings were not applied"):
                state.put(K.WORKSPACE, ws.with_schema(Schema.from_frame(edited, target=ws.target, base=ws.schema)))
                state.put(K.LAST_NOTICE, "Feature settings applied.")
                st.rerun()


def _constraints(ws) -> None:
    """The analyst's constraints between features: written one per line, every line checked
    as it is entered, applied to every analysis."""
    st.subheader("Constraints between features")
    st.caption("One per line: linear rows over the new values (Age), the row's own values (old(Age)) and the "
               "changes (delta(Age)); implications (if … then …); category moves (Feature: level -> level, "
               "level). Every counterfactual and the audit keep them; a row no action can help under them is "
               "counted as precluded. A name with spaces or symbols goes in backquotes.")
    with st.expander("Examples written for this data"):
        st.code("\n".join(examples(ws.schema)) or "# this data has no feature a constraint can name", language=None)
    current = "\n".join(ws.schema.constraints)
    text = st.text_area("Constraints (one per line; # starts a comment)", value=current, key="dm_constraints",
                        height=140)
    found = problems(text, ws.schema)
    for exc in found:
        st.error(plain(exc))
    n = len([line for line in text.splitlines() if line.strip() and not line.strip().startswith("#")])
    if not found and n:
        st.caption(f"{n} constraint{'s' * (n != 1)} read without a problem" +
                   ("." if text.strip() == current.strip() else "; apply them to use them."))
    if st.button("Apply constraints", key="dm_apply_constraints", disabled=bool(found) or text == current):
        with user_errors("The constraints were not applied"):
            state.put(K.WORKSPACE, ws.with_schema(ws.schema.with_constraints(text)))
            state.put(K.LAST_NOTICE, f"{n} constraint{'s' * (n != 1)} between features in force." if n else
                      "No constraint between features is in force.")
            st.rerun()


def _data_csv(ws) -> str:
    """The rows in the raw columns the model takes (category names, not codes), the
    label and the prediction; built when downloaded, not on every rerun."""
    out = ws.to_raw(ws.X)
    if ws.y is not None:
        out.insert(0, ws.target, ws.y.to_numpy())
    out["prediction"] = ws.predictions
    if ws.class_names:
        out["predicted outcome"] = [ws.outcome_text(p) for p in ws.predictions]
    return to_csv(out)


def _files(ws) -> None:
    """The settings and the data downloaded, and settings loaded from a file."""
    c1, c2, c3 = st.columns(3)
    download(c1, "Download settings (JSON)", ws.schema.to_json(), "schema.json", "application/json",
             key="dm_dl_schema")
    download(c2, "Download data with predictions (CSV)", partial(_data_csv, ws), "data_predictions.csv", "text/csv",
             key="dm_dl_data", source=ws, prepare=len(ws.X) > 50_000)
    schema_file = c3.file_uploader("Load settings (JSON)", type=["json"], key="dm_schema_file")
    if schema_file is not None and st.button("Apply loaded settings", key="dm_apply_schema_file"):
        with user_errors("The settings file was not applied"):
            state.put(K.WORKSPACE, ws.with_schema(Schema.from_json(schema_file.getvalue())))
            state.put(K.LAST_NOTICE, f"Feature settings loaded from {schema_file.name}.")
            st.rerun()


def main() -> None:
    st.title("Data & model")
    st.caption("Load a dataset and the model to audit, then check the feature settings "
               "that every analysis uses.")
    _notices()
    # back on this page (Streamlit forgets the radio on other pages): the source of what is loaded
    uploaded = state.get(K.WORKSPACE) is not None and not state.get(K.DEMO)
    source = st.radio("Source", ["Built-in demo", "Upload your own"], index=int(uploaded), horizontal=True,
                      key="dm_source")
    if source == "Built-in demo":
        _demo()
    else:
        _upload()
    ws = state.get(K.WORKSPACE)
    if ws is None:
        st.info("Nothing is loaded yet: pick a demo or upload a dataset and a model.")
        st.stop()
    _summary(ws)
    _data(ws)
    if ws.ensemble.is_classifier and len(ws.ensemble.classes) <= 50:
        _class_names(ws)
    _feature_settings(ws)
    _constraints(ws)
    _files(ws)


main()
