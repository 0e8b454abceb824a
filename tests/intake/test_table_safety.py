"""Tables read under limits set before memory is spent (core.intake.parquet, core.intake.io),
and tables read exactly as written: CR-only line endings, decimals, a named
index; nested columns and too-wide categories refused with their names.

The Parquet bombs of issue #37: a dictionary page holding one 100,000-character
string used by 65,000 rows (a few hundred bytes of file, 6.2 GB decoded), the same
with 10,000 characters and 190,000 rows, the prefix trick of DELTA_BYTE_ARRAY and a
plain page that decompresses to more than the budget; each is refused before it is
decoded, the reading process growing by less than 100 MB and giving back what it
touched."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT

from core.errors import DataError
from core.intake.io import load_table, prepare_data
from dashboard.deploy import Deployment

PUBLIC = Deployment(public=True, max_upload_mb=50, max_rows=200_000, scheduler=None, max_table_mb=512)
LOCAL = Deployment(public=False, max_upload_mb=200, max_rows=None, scheduler=None, max_table_mb=2048)


def _parquet(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, str]:
    """A 150 M-row Parquet file of well under 2 MB (one int column), and a small
    file of 5 M copies of one 700-character string."""
    d = tmp_path_factory.mktemp("bombs")
    ints = pa.chunked_array([pa.array(np.full(1_000_000, 7, dtype=np.int64))] * 150)
    rows = d / "rows.parquet"
    rows.write_bytes(_parquet(pa.table({"x": ints, "y": ints}), compression="zstd", row_group_size=50_000_000))
    text = pa.chunked_array([pa.array(["z" * 700] * 1_000_000)] * 5)
    strings = d / "strings.parquet"
    strings.write_bytes(_parquet(pa.table({"s": text}), compression="zstd", row_group_size=5_000_000))
    assert rows.stat().st_size < 2 * 2**20 and strings.stat().st_size < 2**20
    return {"rows": str(rows), "strings": str(strings)}


def _refusal_in_child(path: str | list[str], public: bool) -> dict:
    """Read ``path`` (or each of a list of paths, one after another) through the app's loader in a
    fresh process: the message (``messages``: one per file), the growth of its peak RSS (VmHWM),
    and of its RSS once refused (what it kept)."""
    paths = [path] if isinstance(path, str) else path
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT)!r})
        import pyarrow, pyarrow.parquet, pyarrow.compute, pandas, charset_normalizer
        from dashboard.deploy import Deployment
        from dashboard.loaders import read_table

        def status(key):      # this process's own figures (ru_maxrss carries the parent's peak over exec)
            for line in open("/proc/self/status"):
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
        dep = {"PUBLIC" if public else "LOCAL"}
        read_table(b"a,b\\n1,2\\n", "warm.csv", dep)          # the modules a read imports
        start, before = status("VmRSS"), status("VmHWM")
        messages = []
        for path in {paths!r}:
            try:
                read_table(open(path, "rb").read(), "upload.parquet", dep)
                messages.append(None)
            except ValueError as exc:
                messages.append(str(exc))
        print(json.dumps({{"message": messages[0], "messages": messages, "grown_mb": status("VmHWM") - before,
                           "kept_mb": status("VmRSS") - start}}))
    """)
    setup = ("PUBLIC = Deployment(public=True, max_upload_mb=50, max_rows=200_000, scheduler=None, "
             "max_table_mb=512)\nLOCAL = Deployment(public=False, max_upload_mb=200, max_rows=None, "
             "scheduler=None, max_table_mb=2048)\n")
    script = script.replace("dep = ", setup + "dep = ", 1)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _one_string_many_times(rows: int, chars: int, **kw) -> bytes:
    """The issue's recipe: one dictionary entry of ``chars`` characters, used by every row."""
    col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array(["s" * chars]))
    return _parquet(pa.table({"s": col}), use_dictionary=True, store_schema=False, **kw)


@pytest.fixture(scope="module")
def text_bombs(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("text_bombs")
    # 40,000 strings of 20,000 characters, made from their buffers: the same array as
    # pa.array(["s" * 20_000] * 40_000), which spent 2-4 CPU-s converting the Python list
    text = pa.StringArray.from_buffers(40_000, pa.py_buffer(np.arange(40_001, dtype=np.int32) * 20_000),
                                       pa.py_buffer(b"s" * (20_000 * 40_000)))
    repeat = pa.table({"s": text})
    files = {
        "dictionary 65,000 x 100,000": _one_string_many_times(65_000, 100_000, compression="gzip"),
        "dictionary 190,000 x 10,000": _one_string_many_times(190_000, 10_000, compression="gzip"),
        "dictionary, 10 row groups": _one_string_many_times(190_000, 10_000, compression="zstd",
                                                            row_group_size=19_000),
        "shared prefixes": _parquet(repeat, use_dictionary=False, column_encoding={"s": "DELTA_BYTE_ARRAY"},
                                    compression="zstd", store_schema=False),
        "shared prefixes, v2 pages": _parquet(repeat, use_dictionary=False, compression="zstd", store_schema=False,
                                              column_encoding={"s": "DELTA_BYTE_ARRAY"}, data_page_version="2.0"),
        "plain": _parquet(repeat, use_dictionary=False, compression="zstd", store_schema=False),
    }
    paths = {}
    for i, (name, data) in enumerate(files.items()):
        assert len(data) < 80_000, (name, len(data))
        (d / f"{i}.parquet").write_bytes(data)
        paths[name] = str(d / f"{i}.parquet")
    return paths


@pytest.mark.parametrize("name", ["dictionary 65,000 x 100,000", "dictionary 190,000 x 10,000",
                                  "dictionary, 10 row groups", "shared prefixes", "shared prefixes, v2 pages", "plain"])
def test_text_bombs_are_refused_before_decoding_in_public_mode(text_bombs, name):
    """Before: 1.5-8.5 GB of peak memory for the first two, each refused only after a batch of 65,536 rows
    had been decoded. Now refused from the page headers or a count of dictionary indices."""
    got = _refusal_in_child(text_bombs[name], public=True)
    assert got["message"] and "MB" in got["message"] and "512 MB" in got["message"], got
    assert got["grown_mb"] < 100, got
    assert got["kept_mb"] < 30, got


def test_the_largest_text_bomb_is_refused_locally_too(text_bombs):
    got = _refusal_in_child(text_bombs["dictionary 65,000 x 100,000"], public=False)
    assert got["message"] and "6,200 MB" in got["message"] and "2,048 MB" in got["message"], got
    assert got["grown_mb"] < 100, got


@pytest.mark.parametrize("public", [True, False], ids=["public", "local"])
def test_five_text_bombs_in_a_row_leave_nothing_behind(text_bombs, public):
    """Before: five small files in a row peaked at 5.7 GB on a public server, and 2.6 GB were still
    held once every session had closed. Now each is refused (locally the 6.2 GB one; the 1.8 GB ones
    are within the 2 GB budget there and left out) and the process keeps what it had."""
    names = (["dictionary 65,000 x 100,000", "dictionary 190,000 x 10,000", "dictionary, 10 row groups",
              "shared prefixes", "plain"] if public else ["dictionary 65,000 x 100,000"] * 5)
    got = _refusal_in_child([text_bombs[n] for n in names], public=public)
    limit = "the limit is 512 MB" if public else "the limit is 2,048 MB"
    assert len(got["messages"]) == 5 and all(m and limit in m for m in got["messages"]), got
    assert got["grown_mb"] < 100, got
    assert got["kept_mb"] < 50, got


@pytest.mark.slow
def test_a_dictionary_column_whose_bound_is_loose_is_measured_and_read():
    """One long entry used once: the bound from the pages (rows x longest entry, 1 GB) passes a 64 MB
    budget, the real size (8 MB) does not, so the column is measured from its indices and read."""
    rng = np.random.default_rng(0)
    levels = np.array([f"level {i}" for i in range(999)] + ["x" * 5000], dtype=object)   # not <U5000: 4 GB
    codes = rng.integers(0, 999, 200_000)
    codes[123] = 999
    df = pd.DataFrame({"cat": levels[codes], "v": rng.normal(size=200_000)})
    data = _parquet(pa.Table.from_pandas(df, preserve_index=False), use_dictionary=True)
    back = load_table(data, "c.parquet", max_decoded_bytes=64 * 2**20)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    with pytest.raises(DataError, match="the limit is 4 MB"):
        load_table(data, "c.parquet", max_decoded_bytes=4 * 2**20)


def test_every_text_encoding_reads_back_exactly():
    """The bounds are bounds, not refusals: plain, dictionary, both delta encodings, v1 and v2 pages."""
    rng = np.random.default_rng(1)
    text = pa.array([None if i % 17 == 0 else f"v{i % 300}-" + "é" * int(rng.integers(0, 40))
                     for i in range(20_000)])
    table = pa.table({"t": text, "x": pa.array(rng.normal(size=20_000))})
    for kw in ({"use_dictionary": True}, {"use_dictionary": False},
               {"use_dictionary": False, "column_encoding": {"t": "DELTA_BYTE_ARRAY", "x": "BYTE_STREAM_SPLIT"}},
               {"use_dictionary": False, "column_encoding": {"t": "DELTA_LENGTH_BYTE_ARRAY"}},
               {"use_dictionary": True, "data_page_version": "2.0", "data_page_size": 4096}):
        back = load_table(_parquet(table, **kw), "t.parquet", max_decoded_bytes=8 * 2**20)
        assert back["t"].fillna("<na>").tolist() == [v if v is not None else "<na>" for v in text.to_pylist()], kw
        np.testing.assert_array_equal(back["x"].to_numpy(), table.column("x").to_numpy())


def test_a_parquet_row_bomb_is_refused_in_public_mode_before_memory_is_spent(bombs):
    got = _refusal_in_child(bombs["rows"], public=True)
    assert got["message"] and "150,000,000 rows" in got["message"] and "200,000" in got["message"]
    assert got["grown_mb"] < 200, got


def test_a_string_bomb_is_refused_by_its_decoded_size(bombs):
    """Locally there is no row cap: the decoded size (5 M x 700 characters) is what refuses it."""
    got = _refusal_in_child(bombs["strings"], public=False)
    assert got["message"] and "memory" in got["message"] and "MB" in got["message"]
    assert got["grown_mb"] < 200, got


def test_a_csv_is_parsed_no_further_than_the_row_cap():
    data = ("a,b\n" + "1,2\n" * 300_000).encode()
    with pytest.raises(DataError, match="more than 200,000 rows"):
        load_table(data, "big.csv", max_rows=200_000)
    assert len(load_table(data, "big.csv", max_rows=300_000)) == 300_000


def test_cr_only_line_endings_are_read_exactly():
    df = load_table(b"age,income,label\r31,52000.5,1\r45,61000,0\r", "mac.csv")
    assert list(df.columns) == ["age", "income", "label"]
    assert df.to_dict("list") == {"age": [31, 45], "income": [52000.5, 61000.0], "label": [1, 0]}


def test_decimal_columns_are_numbers_and_nested_columns_are_refused():
    dec = pa.array([Decimal("1.25"), Decimal("-3.50"), None], pa.decimal128(10, 2))
    df = load_table(_parquet(pa.table({"amount": dec, "label": [0, 1, 0]})), "d.parquet")
    assert df["amount"].dtype == np.float64 and df["amount"].iloc[:2].tolist() == [1.25, -3.5]
    assert np.isnan(df["amount"].iloc[2]) and not df.attrs.get("notes")
    prep = prepare_data(df.dropna(), "label")
    assert prep.X["amount"].tolist() == [1.25, -3.5]
    wide = pa.array([Decimal("0.12345678901234567890")], pa.decimal128(38, 20))
    assert "rounded" in load_table(_parquet(pa.table({"v": wide, "w": [1]})), "w.parquet").attrs["notes"][0]
    for name, col in [("tags", pa.array([[1, 2], [3]])), ("point", pa.array([{"x": 1}, {"x": 2}]))]:
        with pytest.raises(DataError, match=name):
            load_table(_parquet(pa.table({name: col, "label": [0, 1]})), "n.parquet")


def test_a_named_index_saved_by_pandas_is_kept_as_a_column():
    df = pd.DataFrame({"a": [1.0, 2.0], "label": [0, 1]}, index=pd.Index([10, 20], name="customer_id"))
    buf = io.BytesIO()
    df.to_parquet(buf)
    back = load_table(buf.getvalue(), "i.parquet")
    assert list(back.columns) == ["customer_id", "a", "label"] and back["customer_id"].tolist() == [10, 20]


def test_training_refuses_a_text_column_with_too_many_values():
    df = pd.DataFrame({"id": [f"c{i}" for i in range(1000)], "x": np.arange(1000.0), "label": [0, 1] * 500})
    with pytest.raises(DataError, match="'id' has 1,000"):
        prepare_data(df, "label")


def test_load_table_follows_the_deployment_it_runs_in(text_bombs, monkeypatch):
    """Issue #60 item 8: the library's load_table ignored ATLAS_PUBLIC=1 (its limit stayed 2,048 MB of decoded
    memory and no row cap). It now reads the limits the app does (core.intake.limits), each argument given
    still winning; the app's deployment settings take theirs from the same place."""
    from core.intake.limits import table_limits
    from dashboard import deploy

    for var in ("ATLAS_PUBLIC", "ATLAS_MAX_ROWS", "ATLAS_MAX_UPLOAD_MB", "ATLAS_MAX_TABLE_MB"):
        monkeypatch.delenv(var, raising=False)
    bomb = open(text_bombs["dictionary 190,000 x 10,000"], "rb").read()       # 1.8 GB once decoded
    rows = b"a,b\n" + b"1,2\n" * 200_001
    monkeypatch.setenv("ATLAS_PUBLIC", "1")
    with pytest.raises(DataError, match="the limit is 512 MB"):
        load_table(bomb, "upload.parquet")
    with pytest.raises(DataError, match="at most 200,000"):
        load_table(rows, "t.csv")
    assert len(load_table(rows, "t.csv", max_rows=300_000)) == 200_001           # the caller's own limit
    monkeypatch.setenv("ATLAS_MAX_ROWS", "250000")
    assert len(load_table(rows, "t.csv")) == 200_001
    monkeypatch.setenv("ATLAS_MAX_ROWS", "lots")
    with pytest.raises(DataError, match="ATLAS_MAX_ROWS='lots'"):
        load_table(rows, "t.csv")
    monkeypatch.delenv("ATLAS_PUBLIC")
    monkeypatch.delenv("ATLAS_MAX_ROWS")
    with pytest.raises(DataError, match="the limit is 2,048 MB"):                 # local: the library's own
        load_table(open(text_bombs["dictionary 65,000 x 100,000"], "rb").read(), "upload.parquet")
    assert len(load_table(rows, "t.csv")) == 200_001
    none = ROOT / "no-such-settings.toml"
    for env in ({}, {"ATLAS_PUBLIC": "1"}, {"ATLAS_PUBLIC": "1", "ATLAS_MAX_TABLE_MB": "100"}):
        dep, lim = deploy.load(env, none), table_limits(env)
        assert (dep.public, dep.max_upload_mb, dep.max_rows, dep.max_table_mb) == (
            lim.public, lim.max_upload_mb, lim.max_rows, lim.max_table_mb)
    assert deploy.load({"ATLAS_PUBLIC": "1"}, none).max_rows == 200_000
