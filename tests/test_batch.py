"""core.batch: parallel map in input order, early stop, and a run interrupted
while another starts (as when the app reruns a page during a long run)."""

from __future__ import annotations

import gc
import time
import warnings

import pytest

from core.batch import map_rows


def _double(x):
    time.sleep(0.02)
    return 2 * x


@pytest.mark.parametrize("chunk", [1, 3])
def test_parallel_results_are_in_input_order(chunk):
    assert map_rows(_double, list(range(23)), n_jobs=2, chunk_size=chunk) == [2 * i for i in range(23)]


def test_should_stop_skips_the_rest():
    out = map_rows(_double, list(range(40)), n_jobs=2, should_stop=lambda: True)
    assert out[0] == 0 and out.count(None) > 0


class _Interrupt(Exception):
    pass


def test_an_interrupted_run_does_not_break_the_next_one():
    kept = {}

    def interrupt(done, total):
        if done >= 4:
            raise _Interrupt()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            map_rows(_double, list(range(200)), n_jobs=2, progress=interrupt)
        except _Interrupt as exc:
            kept["exc"] = exc   # its traceback keeps the interrupted run's frame alive

        def release_old(done, total):
            if done == 2:
                kept.clear()
                gc.collect()    # the old run is collected while the new one is running

        assert map_rows(_double, list(range(10)), n_jobs=2, progress=release_old) == [2 * i for i in range(10)]
