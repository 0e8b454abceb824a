"""Solver formulations of the counterfactual problem built by core.optimal."""
