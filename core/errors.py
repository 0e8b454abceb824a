"""The small exception hierarchy of ``core``.

Every error a user can cause subclasses ``ValueError`` and says what was
expected, what arrived and how to fix it, so the app can show the message
as is and a script can catch ``ValueError``.
"""


class AtlasError(ValueError):
    """Base class of the user-facing errors of Counterfactual Atlas."""


class UnsupportedModelError(AtlasError):
    """The model's type, objective or split kind is not supported."""


class ModelError(AtlasError):
    """A model file or object is corrupt or inconsistent."""


class DataError(AtlasError):
    """A data file cannot be read or holds values that cannot be used."""


class SchemaError(AtlasError):
    """The data does not match the model or the feature settings."""


class UntrustedPickleError(AtlasError):
    """A pickle/joblib file was given without the user trusting it."""
