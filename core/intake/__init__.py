"""Intake: reading tables and models, and making them one checked workspace.

:mod:`core.intake.io` reads tables (CSV; Parquet within limits, :mod:`core.intake.parquet`)
and model files, whose trees :mod:`core.intake.parsing` converts (one parser per
library);
:mod:`core.intake.sandbox` does that for untrusted bytes in a child process
(forked from :mod:`core.intake.forkserver`, as are :mod:`core.intake.worker`'s).
:mod:`core.intake.models` holds :func:`~core.intake.models.from_model`, the one
entry from a fitted model to a :class:`core.model.TreeEnsemble`, and registers it
as :mod:`core.model`'s converter. :mod:`core.intake.workspace` matches a table to
a model (:mod:`core.intake.matching`, :mod:`core.intake.columns`);
:mod:`core.intake.training` trains a model in the app,
:mod:`core.intake.demo` builds the embedded demo and :mod:`core.intake.csvsafe`
writes tables back out as CSV no spreadsheet runs as formulas.

Nothing below ``core.intake`` (the model, the kernel, the analyses) imports it.
"""
