"""Loading tables and models from bytes: formats, and a clear error for each kind of bad input."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import pickle
import zipfile

import numpy as np
import pandas as pd
import pytest
from conftest import adult_sources, carried_data

from core.errors import DataError, ModelError, SchemaError, UnsupportedModelError, UntrustedPickleError
from core.intake import io as cio
from core.intake.models import from_model
from core.schema import validate


def _csv(df: pd.DataFrame, sep: str = ",") -> bytes:
    return df.to_csv(index=False, sep=sep).encode()


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=80), "b": rng.integers(0, 5, 80), "c": rng.normal(size=80)})
    df["y"] = (df["a"] + df["b"] > 2).astype(int)
    return df


def test_csv_roundtrip_with_sniffed_delimiters(table):
    for sep in (",", ";", "\t", "|"):
        df = cio.load_table(_csv(table, sep), "t.csv")
        pd.testing.assert_frame_equal(df, table, check_dtype=False)


def test_latin1_and_bom_encodings(table):
    t = table.rename(columns={"a": "âge"})
    assert list(cio.load_table(_csv(t).decode().encode("cp1252"), "t.csv").columns)[0] == "âge"
    assert list(cio.load_table(b"\xef\xbb\xbf" + _csv(t), "t.csv").columns)[0] == "âge"


def test_parquet(table):
    buf = io.BytesIO()
    table.to_parquet(buf)
    pd.testing.assert_frame_equal(cio.load_table(buf.getvalue(), "t.parquet"), table)


@pytest.mark.parametrize("data,match", [
    (b"", "empty"),
    (b"   \n\n", "blank"),
    (b"a,b,c\n", "no data rows"),
    (b"a b c\n1 2 3\n4 5 6\n", "delimiter"),
    (b"a,b\n1,2,3,4\n5,6\n", "consistent"),
    (b"a,,c\n1,2,3\n", "without a name"),
    (b"PAR1garbage", "Parquet"),
])
def test_bad_tables_say_what_is_wrong(data, match):
    with pytest.raises(DataError, match=match):
        cio.load_table(data, "bad.csv")


def test_size_limit(table):
    with pytest.raises(DataError, match="limit"):
        cio.load_table(_csv(table), "t.csv", max_bytes=100)


def test_strings_in_numeric_columns_are_reported_with_an_example(table):
    t = table.astype({"a": object})
    t.loc[5, "a"] = "abc"
    df = cio.load_table(_csv(t), "t.csv")
    with pytest.raises(DataError, match=r"'a': 1 non-numeric values \(e.g. 'abc' in row 5\)"):
        cio.prepare_data(df, "y")


def test_missing_values_are_reported_not_dropped_unless_asked(table):
    t = table.copy()
    t.loc[[3, 7], "c"] = np.nan
    df = cio.load_table(_csv(t), "t.csv")
    with pytest.raises(DataError, match="2 of 80 rows have missing values"):
        cio.prepare_data(df, "y")
    p = cio.prepare_data(df, "y", drop_missing=True)
    assert len(p.X) == 78 and any("Dropped 2 rows" in n for n in p.notes)


def test_text_columns_are_one_hot_encoded(table):
    t = table.copy()
    t["city"] = np.where(t["b"] > 2, "Paris", "Lyon")
    p = cio.prepare_data(cio.load_table(_csv(t), "t.csv"), "y")
    assert {"city=Lyon", "city=Paris"} <= set(p.X.columns)
    assert p.groups == {"city": ["city=Lyon", "city=Paris"]}
    assert (p.X[["city=Lyon", "city=Paris"]].sum(axis=1) == 1).all()


@pytest.mark.parametrize("adult", adult_sources())
def test_type_row_files_of_compas_and_adult(adult):
    df = cio.load_table(carried_data("compas.csv").read_bytes(), "compas.csv")
    assert df.attrs["target"] == "Class" and df.attrs["column_types"]["PriorsCount"] == "integer"
    assert pd.api.types.is_numeric_dtype(df["PriorsCount"])
    prep = cio.prepare_data(cio.load_table(adult.read_bytes(), "adult.csv"), "Class")
    assert len(prep.groups["Occupation"]) == 14                 # every level, in the sample too


# ------------------------------------------------------------------ models
@pytest.fixture(scope="module")
def models(table):
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    X, y = table[["a", "b", "c"]], table["y"]
    return {
        "xgb": xgb.XGBClassifier(n_estimators=5, max_depth=3, n_jobs=1).fit(X, y),
        "lgb": lgb.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y),
        "rf": RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y),
    }


def _assert_same(native, loaded, X):
    a = from_model(native).predict_proba(X)
    b = from_model(loaded).predict_proba(X)
    np.testing.assert_allclose(a, b, atol=1e-7)


@pytest.mark.parametrize("ext", ["json", "ubj"])
def test_xgboost_files(tmp_path, models, table, ext):
    path = tmp_path / f"m.{ext}"
    models["xgb"].save_model(path)
    loaded = cio.load_model(path.read_bytes(), path.name)
    _assert_same(models["xgb"], loaded, table[["a", "b", "c"]].to_numpy())
    assert from_model(loaded).feature_names == ("a", "b", "c")


def test_lightgbm_text(tmp_path, models, table):
    path = tmp_path / "m.txt"
    models["lgb"].booster_.save_model(path)
    loaded = cio.load_model(path.read_bytes(), path.name)
    _assert_same(models["lgb"], loaded, table[["a", "b", "c"]].to_numpy())


def test_skops_with_allow_list(models, table):
    import skops.io as sio

    loaded = cio.load_model(sio.dumps(models["rf"]), "m.skops")
    _assert_same(models["rf"], loaded, table[["a", "b", "c"]].to_numpy())


class Payload:
    """A type no allow-list knows."""

    def __init__(self):
        self.x = 1


def test_skops_outside_allow_list_is_refused():
    import skops.io as sio

    with pytest.raises(UnsupportedModelError, match="allow-list"):
        cio.load_model(sio.dumps({"model": Payload()}), "m.skops")


def test_untrusted_pickle_is_refused_and_trusted_one_loads(models):
    data = pickle.dumps(models["rf"])
    for name in ("m.pkl", "m.joblib", "model.bin"):
        with pytest.raises(UntrustedPickleError, match="trust"):
            cio.load_model(data, name)
    assert type(cio.load_model(data, "m.pkl", allow_pickle=True)).__name__ == "RandomForestClassifier"


@pytest.mark.parametrize("data,name", [
    (b"", "m.json"), (b"{not json", "m.json"), (b"\x00\x01garbage", "m.ubj"), (b"tree\nversion=v4\ngarbage", "m.txt"),
    (b"PKnot-a-zip", "m.skops"), (b"hello", "m.model"),
])
def test_corrupt_model_files(data, name):
    with pytest.raises((ModelError, UnsupportedModelError)):
        cio.load_model(data, name)


def test_corrupt_trusted_pickle_says_so():
    with pytest.raises(ModelError, match="unpickled"):
        cio.load_model(b"\x80\x04garbage", "m.pkl", allow_pickle=True)


def test_model_with_wrong_number_of_features(models, table):
    ens = from_model(models["rf"])
    with pytest.raises(SchemaError, match=r"expects columns \['c'\]"):
        validate(table[["a", "b"]], ens)
    with pytest.raises(SchemaError, match="missing values"):
        validate(table[["a", "b", "c"]].assign(c=np.nan), ens)


def test_generic_names_match_by_position(tmp_path, models, table):
    booster = models["xgb"].get_booster()
    booster.feature_names = None
    path = tmp_path / "m.json"
    booster.save_model(path)
    ens = from_model(cio.load_model(path.read_bytes(), "m.json"))
    assert ens.feature_names == ("f0", "f1", "f2")
    X = validate(table.drop(columns="y"), ens)
    assert list(X.columns) == ["a", "b", "c"]
    with pytest.raises(SchemaError, match="3"):
        validate(table[["a", "b"]], ens)


@pytest.mark.parametrize("family", cio.FAMILIES)
def test_train_model_here(table, family):
    tm = cio.train_model(table[["a", "b", "c"]], table["y"], family, n_estimators=20, max_depth=3)
    assert tm.task == "classification" and 0.5 <= tm.holdout_score <= 1.0
    from_model(tm.model)


def test_train_refuses_a_constant_target(table):
    with pytest.raises(DataError, match="single value"):
        cio.train_model(table[["a", "b"]], table["y"] * 0, "random_forest")


# ------------------------------------------------------------------ text encodings (#37 item 5)
FRENCH = ("âge,ville,catégorie,revenu,étiquette\n34,Genève,étudiant,1200,1\n51,Zürich,employé,3400,0\n"
          "29,São Paulo,cadre supérieur,5100,1\n45,Málaga,retraité,2100,0\n38,Köln,ingénieur,2900,1\n")
GERMAN = "größe;straße;stadt;y\n1;Grüße;München;0\n2;Ölweg;Düsseldorf;1\n3;Fußweg;Nürnberg;0\n"
SPANISH = "año\tseñal\tciudad\ty\n1\tñandú\tCórdoba\t0\n2\tpingüino\tLogroño\t1\n3\tcañón\tMálaga\t0\n"


def _expected(text: str, sep: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text), sep=sep)


def _encoded(text: str, how: str) -> bytes:
    boms = {"utf-16-le+bom": ("utf-16-le", b"\xff\xfe"), "utf-16-be+bom": ("utf-16-be", b"\xfe\xff"),
            "utf-32-le+bom": ("utf-32-le", b"\xff\xfe\x00\x00"), "utf-32-be+bom": ("utf-32-be", b"\x00\x00\xfe\xff")}
    if how in boms:
        enc, bom = boms[how]
        return bom + text.encode(enc)
    return text.encode(how)


ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-16-le+bom", "utf-16-be+bom", "utf-32",
             "utf-32-le", "utf-32-be", "utf-32-le+bom", "utf-32-be+bom", "cp1252", "latin-1", "mac_roman", "cp850"]


@pytest.mark.parametrize("how", ENCODINGS)
@pytest.mark.parametrize("text,sep", [(FRENCH, ","), (GERMAN, ";"), (SPANISH, "\t")], ids=["fr", "de", "es"])
def test_every_encoding_is_read_right(text, sep, how):
    """Non-ASCII column names and values in each encoding read back as written (before: UTF-16 without a BOM and
    UTF-32 put NULs in every column name; Mac OS Roman and DOS 850 gave replacement characters)."""
    df = cio.load_table(_encoded(text, how), "t.csv")
    pd.testing.assert_frame_equal(df, _expected(text, sep), check_dtype=False)
    legacy = how in ("cp1252", "latin-1", "mac_roman", "cp850")
    notes = df.attrs.get("notes", [])
    assert any("not UTF-8" in n for n in notes) == legacy, notes     # a guessed code page is said


# ------------------------------------------------------------------ East Asian code pages (#60 item 8)
JAPANESE = ("年齢,収入,職業,回答,クラス\n34,1200,会社員,はい,1\n51,3400,公務員,いいえ,0\n29,800,学生,はい,1\n"
            "45,2100,自営業,いいえ,0\n")
NAMES_JA = "名前,年齢,Class\n田中,34,1\n鈴木,51,0\n山本,29,1\n"          # the file: read as Windows-949
CHINESE = ("年龄,收入,职业,城市,类别\n34,1200,工程师,北京,1\n51,3400,教师,上海,0\n29,5100,医生,广州,1\n"
           "45,2100,学生,深圳,0\n")
TAIWANESE = "年齡,收入,職業,城市,類別\n34,1200,工程師,臺北,1\n51,3400,教師,高雄,0\n29,5100,醫生,臺中,1\n"
KOREAN = "나이,소득,직업,지역,등급\n34,1200,회사원,서울,1\n51,3400,교사,부산,0\n29,5100,의사,대구,1\n"
EAST_ASIAN = {"ja-shift_jis": (JAPANESE, "shift_jis"), "ja-cp932": (JAPANESE, "cp932"), "ja-euc_jp": (JAPANESE, "euc_jp"),
              "names-shift_jis": (NAMES_JA, "shift_jis"), "names-euc_jp": (NAMES_JA, "euc_jp"),
              "zh-gbk": (CHINESE, "gbk"), "zh-gb2312": (CHINESE, "gb2312"), "zh-gb18030": (CHINESE, "gb18030"),
              "tw-big5": (TAIWANESE, "big5"), "tw-cp950": (TAIWANESE, "cp950"), "ko-cp949": (KOREAN, "cp949"),
              "ko-euc_kr": (KOREAN, "euc_kr")}


@pytest.mark.parametrize("text,how", list(EAST_ASIAN.values()), ids=list(EAST_ASIAN))
def test_east_asian_code_pages_are_read_right(text, how):
    """Japanese, Chinese and Korean column names and values read back exactly, and the note names the
    code page (before: Shift-JIS '名前,年齢' read as Windows-949 '뼹멟,봏쀮', EUC-JP as Big5 or Windows-949)."""
    df = cio.load_table(text.encode(how), "t.csv")
    assert list(df.columns) == text.splitlines()[0].split(",")
    pd.testing.assert_frame_equal(df, _expected(text, ","), check_dtype=False)
    language = {"shift_jis": "Japanese", "cp932": "Japanese", "euc_jp": "Japanese", "big5": "Traditional Chinese",
                "cp950": "Traditional Chinese", "cp949": "Korean", "euc_kr": "Korean"}.get(how, "Simplified Chinese")
    assert any("not UTF-8" in n and language in n for n in df.attrs["notes"]), df.attrs


def test_a_file_two_code_pages_read_alike_is_refused_with_both():
    """Four kanji in EUC-JP are also four common hanzi in GBK: refused with both readings and the encoding to
    name (before: read as one of them without a word), and read exactly once it is named."""
    data = "年齢,収入\n34,1200\n51,3400\n".encode("euc_jp")
    with pytest.raises(DataError, match="East Asian code pages alike") as info:
        cio.load_table(data, "t.csv")
    said = str(info.value)
    assert "'年齢,収入'" in said and "EUC-JP (Japanese)" in said and "encoding='euc_jp'" in said, said
    assert "GBK" in said and "UTF-8" in said, said
    assert list(cio.load_table(data, "t.csv", encoding="euc_jp").columns) == ["年齢", "収入"]
    assert list(cio.load_table(data, "t.csv", encoding="EUC-JP").columns) == ["年齢", "収入"]
    for wrong, says in (("hex", "not a text encoding"), ("nope", "not a text encoding"), (5, "not a text encoding"),
                        ("ascii", "was to be read as ascii .*but byte 0 is not valid")):
        with pytest.raises(DataError, match=says):
            cio.load_table(data, "t.csv", encoding=wrong)


_WORDS = {"shift_jis": "年齢 収入 職業 性別 氏名 住所 身長 体重 血圧 喫煙 学歴 契約 解約 顧客 会員 店舗 地域 会社員 公務員 学生 男性 "
                       "女性 はい いいえ あり なし 未婚 既婚 大学 価格 数量 売上 在庫 果物 野菜 りんご 評価 満足 普通 天気 晴れ 雨 "
                       "気温 部署 営業部 課長 社員 申込 承認 審査 結果 合格 点数 病名 入院 保険 カテゴリ プラン",
          "gbk": "年龄 收入 职业 性别 姓名 地址 身高 体重 血压 吸烟 学历 合同 客户 会员 门店 地区 城市 北京 上海 工程师 教师 "
                 "医生 学生 男 女 是 否 未婚 已婚 本科 价格 数量 销售额 库存 水果 蔬菜 苹果 评分 满意 一般 天气 晴 雨 气温 部门 "
                 "经理 员工 申请 批准 审核 结果 通过 分数 疾病 住院 保险 违约 流失",
          "big5": "年齡 收入 職業 性別 姓名 地址 身高 體重 血壓 吸菸 學歷 合約 客戶 會員 門市 地區 城市 臺北 高雄 工程師 教師 "
                  "醫生 學生 男 女 是 否 未婚 已婚 大學 價格 數量 銷售額 庫存 水果 蔬菜 蘋果 評分 滿意 普通 天氣 晴 雨 氣溫 部門 "
                  "經理 員工 申請 核准 審核 結果 通過 分數 疾病 住院 保險 違約 流失",
          "cp949": "나이 소득 직업 성별 이름 주소 키 몸무게 혈압 흡연 학력 계약 고객 회원 매장 지역 도시 서울 부산 회사원 공무원 "
                   "학생 남성 여성 예 아니오 있음 없음 미혼 기혼 대학교 가격 수량 매출 재고 과일 채소 사과 평가 만족 보통 날씨 "
                   "맑음 비 기온 부서 영업부 과장 사원 신청 승인 심사 결과 합격 점수 질병 입원 보험 등급"}


def test_short_east_asian_files_are_read_right_or_refused_never_misread():
    """200 small tables (one to four column names, up to five rows of text values) in Shift-JIS, EUC-JP, GBK,
    Big5 and Windows-949: each is read exactly, or refused naming its own code page among the two it reads
    in; none is read as another language (before: 51 of them were, e.g. EUC-JP kanji as hangul)."""
    rng = np.random.default_rng(60)
    read = refused = 0
    for k in range(200):
        how = ["shift_jis", "euc_jp", "gbk", "big5", "cp949"][k % 5]
        words = _WORDS["shift_jis" if how == "euc_jp" else how].split()
        names = list(rng.choice(words, rng.integers(1, 5), replace=False)) + ["y"]
        values = [list(rng.choice(words, 3, replace=False)) for _ in range(rng.integers(0, 3))]
        rows = [[str(rng.choice(v)) for v in values] + ["1"] * (len(names) - len(values)) for _ in range(5)]
        text = "\n".join(",".join(r) for r in [names] + rows) + "\n"
        try:
            df = cio.load_table(text.encode(how), f"t{k}.csv")
        except DataError as exc:
            codec = {"shift_jis": "cp932", "gbk": "gb18030", "big5": "cp950"}.get(how, how)
            assert f"encoding={codec!r}" in str(exc), (how, text, str(exc))
            refused += 1
            continue
        assert list(df.columns) == names, (how, text, list(df.columns))
        assert df.astype(str).to_numpy().tolist() == rows, (how, text)
        read += 1
    assert read >= 140, (read, refused)


@pytest.mark.parametrize("data,match", [
    (bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)), "binary data"),
    (b"a,b\n1,\x002\n3,4\n", "binary data"),
    (bytes(np.random.default_rng(1).integers(128, 256, 5000, dtype=np.uint8)), "not UTF-8.*Save the file as UTF-8"),
    (b"\xff\xfea\x00,\x00b\x00\n\x00\x00\xd8", "UTF-16 .*byte-order mark, but byte"),
])
def test_what_is_not_text_is_refused_by_name(data, match):
    with pytest.raises(DataError, match=match):
        cio.load_table(data, "t.csv")


# ------------------------------------------------------------------ files the csv module choked on
def _odd_files() -> dict[str, tuple[bytes, str]]:
    t = "a,b,y\r\n1,2,0\r\n3,4,1\r\n"
    return {
        "utf-16 with CRLF": (t.encode("utf-16-le"), "t.csv"),
        "utf-32 with CRLF": (t.encode("utf-32"), "t.csv"),
        "a header cell starting with CR": (b"a,\rb,y\n1,2,0\n3,4,1\n", "t.csv"),
        "binary junk": (bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)), "t.csv"),
        "gzip": (gzip.compress(b"a,b,y\n1,2,0\n3,4,1\n"), "t.csv.gz"),
        "a 5 MB header": (b"a" * 5_000_000 + b",b\n1,2\n", "t.csv"),
        "a 5 MB header of 700,000 names": (",".join(f"c{i}" for i in range(700_000)).encode() + b"\n1\n", "t.csv"),
        "a quote never closed": (b'a,b,y\n"1,2,0\n3,4,1\n', "t.csv"),
        "a field of 300,000 characters": (b"a,b\n" + b"x" * 300_000 + b",1\n", "t.csv"),
        "only a byte-order mark": (b"\xef\xbb\xbf", "t.csv"),
        "nothing but delimiters": (b",,,\n,,,\n", "t.csv"),
    }


@pytest.mark.parametrize("name", list(_odd_files()))
def test_no_parser_error_escapes_bare(name):
    """Each odd file loads as written or raises a DataError that says what is wrong (before: a bare
    _csv.Error for the first four and the 5 MB header)."""
    data, fname = _odd_files()[name]
    try:
        df = cio.load_table(data, fname)
    except DataError as exc:
        assert str(exc).startswith(repr(fname)) and "Error:" not in str(exc).split("(")[0], str(exc)
        return
    assert name in ("utf-16 with CRLF", "utf-32 with CRLF", "gzip", "a field of 300,000 characters"), df
    if name != "a field of 300,000 characters":
        assert df.to_dict("list") == {"a": [1, 3], "b": [2, 4], "y": [0, 1]}
    else:
        assert df["a"].iloc[0] == "x" * 300_000


# ------------------------------------------------------------------ compressed tables
def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zip", "gz-unnamed", "zip-parquet"])
def test_compressed_tables_are_read(table, kind):
    raw = _csv(table)
    buf = io.BytesIO()
    table.to_parquet(buf)
    data, name = {"gz": (gzip.compress(raw), "t.csv.gz"), "bz2": (bz2.compress(raw), "t.csv.bz2"),
                  "xz": (lzma.compress(raw), "t.csv.xz"), "zip": (_zip({"data/t.csv": raw}), "t.zip"),
                  "gz-unnamed": (gzip.compress(raw), "upload"),
                  "zip-parquet": (_zip({"t.parquet": buf.getvalue(), "__MACOSX/._t.parquet": b"x"}), "t.zip")}[kind]
    df = cio.load_table(data, name)
    pd.testing.assert_frame_equal(df, table, check_dtype=False)
    said = "compressed with gzip" if kind == "gz-unnamed" else "Read 't."
    assert any(said in n for n in df.attrs["notes"]), df.attrs


@pytest.mark.parametrize("data,name,match", [
    (_zip({"a.csv": b"a,b\n1,2\n", "b.csv": b"a,b\n3,4\n"}), "t.zip", "zip archive of 2 files"),
    (_zip({"[Content_Types].xml": b"<x/>", "xl/workbook.xml": b"<x/>"}), "t.xlsx", "Excel workbook"),
    (b"\x28\xb5\x2f\xfd" + b"\x00" * 20, "t.csv.zst", "zstd archive"),
    (b"7z\xbc\xaf\x27\x1c" + b"\x00" * 20, "t.7z", "7-Zip"),
    (b"\x1f\x8b\x08\x00garbage", "t.csv.gz", "not a readable gzip"),
    (gzip.compress(gzip.compress(b"a,b\n1,2\n")), "t.csv.gz.gz", "another archive"),
    (_zip({}), "t.zip", "zip archive of 0 files"),
], ids=lambda v: v if isinstance(v, str) else "bytes")    # by name: the bytes (gzip's, zip's times) change each run
def test_archives_that_hold_no_single_table_are_refused_by_name(data, name, match):
    with pytest.raises(DataError, match=match):
        cio.load_table(data, name)


def test_a_decompression_bomb_is_stopped_at_the_file_limit():
    """40 MB of CSV in 40 KB of gzip: refused once 10 MB (the limit of an uncompressed file) are decompressed."""
    bomb = gzip.compress(b"a,b\n" + b"1,2\n" * 10_000_000, compresslevel=9)
    assert len(bomb) < 100_000
    with pytest.raises(DataError, match="decompresses to more than 10 MB"):
        cio.load_table(bomb, "t.csv.gz", max_bytes=10 * 2**20)
    with pytest.raises(DataError, match="decompresses to more than 10 MB"):
        cio.load_table(_zip({"t.csv": b"a,b\n" + b"1,2\n" * 10_000_000}), "t.zip", max_bytes=10 * 2**20)


# ------------------------------------------------------------------ the door of load_table and load_model
def test_load_table_takes_a_path_a_file_or_bytes_with_a_name(tmp_path, table):
    path = tmp_path / "people.csv"
    path.write_bytes(_csv(table))
    for source in (str(path), path):
        pd.testing.assert_frame_equal(cio.load_table(source), table, check_dtype=False)
    with open(path, "rb") as f:
        pd.testing.assert_frame_equal(cio.load_table(f), table, check_dtype=False)
    with open(path) as f:                                  # a text-mode file: already text
        pd.testing.assert_frame_equal(cio.load_table(f), table, check_dtype=False)
    pd.testing.assert_frame_equal(cio.load_table(io.BytesIO(_csv(table)), "people.csv"), table, check_dtype=False)
    pd.testing.assert_frame_equal(cio.load_table(bytearray(_csv(table)), "people.csv"), table, check_dtype=False)


@pytest.mark.parametrize("args,match", [
    ((b"a,b\n1,2\n",), "name is missing: with bytes, give the file's name"),
    ((b"a,b\n1,2\n", None), "name is missing"),
    (("no/such/file.csv",), "There is no file at 'no/such/file.csv'"),
    (("a,b\n1,2\n",), "string that is not a path"),
    ((None,), "No table was given"),
    ((123,), "cannot be read from int"),
    (([b"a,b"],), "cannot be read from list"),
    ((b"a,b\n1,2\n", 5), "filename must be the file's name as a string"),
    ((io.BytesIO(b"a,b\n1,2\n"),), "file object has no name"),
])
def test_load_table_checks_its_arguments_at_the_door(args, match):
    """Before: load_table('x.csv') and load_table(data, filename=None) raised AttributeError / TypeError."""
    with pytest.raises(DataError, match=match) as info:
        cio.load_table(*args)
    assert "load_table(path)" in str(info.value) or "There is no file" in str(info.value)


def test_load_table_refuses_a_folder(tmp_path):
    with pytest.raises(DataError, match="is a folder"):
        cio.load_table(tmp_path)


def test_load_model_takes_a_path_and_checks_its_arguments(tmp_path, models, table):
    path = tmp_path / "m.json"
    models["xgb"].save_model(path)
    for source in (str(path), path):
        _assert_same(models["xgb"], cio.load_model(source), table[["a", "b", "c"]].to_numpy())
    with open(path, "rb") as f:
        _assert_same(models["xgb"], cio.load_model(f), table[["a", "b", "c"]].to_numpy())
    for args, match in [(("x.json", ), "There is no file at 'x.json'"), ((path.read_bytes(),), "name is missing"),
                        ((None,), "No model file was given"), ((3.5,), "cannot be read from float"),
                        ((path.read_bytes(), ["m.json"]), "filename must be")]:
        with pytest.raises(ModelError, match=match):
            cio.load_model(*args)
