"""Run fuzz cases in child processes: a crash or a hang on one file is that file's verdict.

The fuzz tests of the model readers (``tests/intake/test_hgb_fuzz.py``,
``tests/intake/test_reading_fuzz.py``) hand :func:`run_cases` their cases
``(name, file name, bytes)``, a context per file name (what the verdict needs
besides the bytes: the rows to compare on) and their verdict function by its
path (``"module:function"``, called as ``verdict(file name, bytes, context)`` and
returning ``(kind, text)``). The cases are split between ``workers`` child
processes, each reading its share one file after another and writing
``start i`` before a case and its verdict after it; a child that dies or hangs
(:data:`CASE_LIMIT`) gives that case the verdict ``"crash"`` and a new child
carries on after it. The children's standard output is the library's (LightGBM
prints warnings there): the replies go through a file descriptor of their own.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import selectors
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASE_LIMIT = 30.0           # seconds one file may take in the child
STARTUP_LIMIT = 20.0        # and the child's imports before its first file


def worker(path: str, first: int) -> None:
    """Child process: the verdicts of the cases pickled at ``path`` from ``first`` on."""
    import importlib
    import warnings

    warnings.filterwarnings("ignore")
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                                  # the libraries' own prints go to stderr
    with open(path, "rb") as f:
        cases, context, where = pickle.load(f)
    module, _, name = where.partition(":")
    verdict = getattr(importlib.import_module(module), name)
    for i in range(first, len(cases)):
        case, fname, data = cases[i]
        print(json.dumps({"start": i}), file=replies, flush=True)
        t0 = time.process_time()
        kind, text = verdict(fname, data, context.get(fname))
        print(json.dumps({"i": i, "kind": kind, "text": text, "cpu": time.process_time() - t0}), file=replies,
              flush=True)


def _run_chunk(path: Path, n: int, tmp: str) -> dict[int, tuple[str, str, float]]:
    """Verdicts (and CPU seconds) of the ``n`` cases pickled at ``path``, from children."""
    out: dict[int, tuple[str, str, float]] = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    first = 0
    while first < n:
        with open(Path(tmp) / f"stderr-{path.stem}-{first}", "w+") as err:
            proc = subprocess.Popen([sys.executable, "-c", f"from tests.fuzzrun import worker; worker({str(path)!r}, "
                                     f"{first})"], stdout=subprocess.PIPE, stderr=err, cwd=ROOT, env=env, text=True)
            assert proc.stdout is not None
            current, t0 = None, time.monotonic()
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                if not sel.select(timeout=1.0):
                    if time.monotonic() - t0 > CASE_LIMIT + (STARTUP_LIMIT if current is None else 0):
                        proc.kill()
                        break
                    continue
                line = proc.stdout.readline()
                if not line:
                    break
                msg = json.loads(line)
                if "start" in msg:
                    current, t0 = msg["start"], time.monotonic()
                else:
                    out[msg["i"]] = (msg["kind"], msg["text"], msg["cpu"])
                    current = None
            proc.wait()
            sel.close()
            proc.stdout.close()
            err.seek(0)
            tail = err.read()[-600:]
        if current is None:           # every case of the chunk done, or the child failed outside a case
            assert proc.returncode == 0, f"the checking process failed (exit {proc.returncode}): {tail}"
            break
        how = "hung" if proc.returncode == -9 else f"ended with {proc.returncode}"
        out[current] = ("crash", f"the reading process {how}: {tail}", 0.0)
        first = current + 1
    return out


def run_cases(cases: list[tuple[str, str, bytes]], context: dict[str, Any], verdict: str,
              workers: int = 2) -> tuple[dict[str, tuple[str, str]], dict[str, float]]:
    """Every case's verdict ``(kind, text)`` by name, read in ``workers`` child processes at
    once; and the CPU seconds spent: ``"cases"`` (the verdicts themselves) and
    ``"children"`` (the child processes in all, their start-up included)."""
    assert len({c[0] for c in cases}) == len(cases), "two cases of one name"
    chunks = [cases[k::workers] for k in range(workers)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="atlas-fuzz-") as tmp:
        paths = []
        for k, chunk in enumerate(chunks):
            paths.append(Path(tmp) / f"cases-{k}.pkl")
            paths[-1].write_bytes(pickle.dumps((chunk, context, verdict)))
        with ThreadPoolExecutor(workers) as pool:
            done = list(pool.map(lambda k: _run_chunk(paths[k], len(chunks[k]), tmp), range(workers)))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {chunk[i][0]: v[:2] for chunk, got in zip(chunks, done) for i, v in got.items()}
    missing = [c[0] for c in cases if c[0] not in out]
    assert not missing, f"no verdict for {missing[:5]}"
    cpu = {"cases": sum(v[2] for got in done for v in got.values()),
           "children": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}
    return out, cpu
