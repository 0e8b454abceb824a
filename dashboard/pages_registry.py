"""The app's pages: group -> (script in pages/, title, icon). A page is listed
here once its analysis exists; groups without pages are not shown."""

PAGES: dict[str, list[tuple[str, str, str]]] = {
    "Data & model": [("data_model.py", "Data & model", "📂")],
    "Global views": [("metarule_tree.py", "Metarule tree", "🌳"),
                     ("decision_regions.py", "Decision regions", "🗺️"),
                     ("fcca.py", "FCCA thresholds", "🌡️")],
    "Local views": [("optimal_cf.py", "Optimal counterfactual", "🎯"),
                    ("counterfactual_rules.py", "Counterfactual rules", "📏"),
                    ("case_story.py", "Case story", "📖")],
    "Audit": [("fairness_audit.py", "Fairness audit", "⚖️"),
              ("compare_models.py", "Compare models", "🔀"),
              ("history.py", "Audit history", "🗂️")],
}
