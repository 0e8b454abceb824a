"""``python -m core.audit``: the audit's command line (:mod:`core.audit.cli`)."""

from core.audit.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
