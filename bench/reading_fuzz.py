"""The reading fuzz's figures, printed as JSON (``tests/intake/test_reading_fuzz.py``).

The same files as the test (``tests/reading_mutations.py``, seed 0, 60 edits of each
of 25 small models and the outside trial's two forests: 1,527 files) read in two
child processes as the test reads them (``tests/fuzzrun.py``): per library and format the files
and their verdicts (refused, accepted, misread, foreign, crash, unclear), and the CPU
seconds: of the verdicts themselves, of the child processes in all (their imports
included), and per file; the reference, in the same run, is the CPU of reading the
25 unedited files once each in this process (load, convert, verify against the
library), so the ratio says how many such readings the fuzz costs per file. Other
seeds: ``python bench/reading_fuzz.py 3``.

Run: ``python bench/reading_fuzz.py`` (2 cores shared: figures are indicative).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(seed: int = 0) -> dict:
    import fuzzrun

    from core.intake import io
    from core.intake.models import model_from
    from tests.reading_mutations import reading_edits, reading_files

    files = reading_files()
    names = [f for f in files if not f.startswith("_")]
    for f in names:                        # imports and first calls out of the reference
        model_from(io.load_model(files[f], f))
    t0 = time.process_time()
    for f in names:
        model_from(io.load_model(files[f], f))
    reference = (time.process_time() - t0) / len(names)
    cases = reading_edits(files, seed=seed, per_file=60)
    seen, cpu = fuzzrun.run_cases(cases, {f: files["_X"] for f in names}, "tests.intake.test_reading_fuzz:verdict")
    formats: dict[str, dict[str, int]] = {}
    for case, (kind, _) in seen.items():
        fname = case.split(":", 1)[0]
        ext = fname.rsplit(".", 1)[-1]
        fmt = f"scikit-learn {ext}" if ext == "skops" else f"{fname.split('-')[0]} {ext}"
        formats.setdefault(fmt, {"files": 0})
        formats[fmt]["files"] += 1
        formats[fmt][kind] = formats[fmt].get(kind, 0) + 1
    totals = {kind: sum(v.get(kind, 0) for v in formats.values())
              for kind in ("refused", "accepted", "misread", "foreign", "crash", "unclear")}
    per_file = cpu["children"] / len(cases)
    out = {"seed": seed, "files": len(cases), "formats": formats, **totals,
           "cpu_s_verdicts": round(cpu["cases"], 2), "cpu_s_children": round(cpu["children"], 2),
           "cpu_ms_per_file": round(1000 * per_file, 2), "cpu_ms_reference_reading": round(1000 * reference, 2),
           "ratio_per_file_to_reference": round(per_file / reference, 3)}
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
