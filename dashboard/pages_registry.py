"""The app's pages: group -> (script in pages/, title, icon). A page is listed
here once its analysis exists; groups without pages are not shown.

Icons are Streamlit's Material Symbols (``:material/name:``), drawn from the font
Streamlit serves itself, so they render in any browser; emoji would need an emoji
font on the reader's machine and show as empty boxes without one."""

PAGES: dict[str, list[tuple[str, str, str]]] = {
    "Data & model": [("data_model.py", "Data & model", ":material/database:")],
    "Global views": [("metarule_tree.py", "Metarule tree", ":material/account_tree:"),
                     ("decision_regions.py", "Decision regions", ":material/map:"),
                     ("fcca.py", "FCCA thresholds", ":material/thermostat:")],
    "Local views": [("optimal_cf.py", "Optimal counterfactual", ":material/my_location:"),
                    ("counterfactual_rules.py", "Counterfactual rules", ":material/straighten:"),
                    ("case_story.py", "Case story", ":material/menu_book:")],
    "Audit": [("fairness_audit.py", "Fairness audit", ":material/balance:"),
              ("compare_models.py", "Compare models", ":material/compare_arrows:"),
              ("history.py", "Audit history", ":material/history:")],
}
