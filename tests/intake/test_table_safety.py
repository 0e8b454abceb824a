"""Tables read under limits set before memory is spent (core.intake.parquet, core.intake.io),
and tables read exactly as written: CR-only line endings, decimals, a named
index; nested columns and too-wide categories refused with their names."""

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


def _refusal_in_child(path: str, public: bool) -> dict:
    """Read ``path`` through the app's loader in a fresh process; its peak RSS growth and the message."""
    script = textwrap.dedent(f"""
        import json, resource, sys
        sys.path.insert(0, {str(ROOT)!r})
        import pyarrow, pyarrow.parquet, pandas
        from dashboard.deploy import Deployment
        from dashboard.loaders import read_table
        data = open({path!r}, "rb").read()
        dep = {"PUBLIC" if public else "LOCAL"}
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            read_table(data, "upload.parquet", dep)
            message = None
        except ValueError as exc:
            message = str(exc)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps({{"message": message, "grown_mb": grown / 1024}}))
    """)
    setup = ("PUBLIC = Deployment(public=True, max_upload_mb=50, max_rows=200_000, scheduler=None, "
             "max_table_mb=512)\nLOCAL = Deployment(public=False, max_upload_mb=200, max_rows=None, "
             "scheduler=None, max_table_mb=2048)\n")
    script = script.replace("data = open", setup + "data = open", 1)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


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
