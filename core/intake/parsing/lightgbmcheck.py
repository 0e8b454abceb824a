"""Structural checks of LightGBM model text, before LightGBM reads it.

LightGBM's loader (``GBDT::LoadModelFromString`` in ``src/boosting/gbdt_model_text.cpp``,
``Tree::Tree(const char*)`` in ``src/io/tree.cpp``) trusts what the text says: a
header that disagrees with its trees or with itself makes it read outside its
buffers or predict something else than the trees hold. Two outside trials found

* ``num_class=1`` with ``objective=multiclass num_class:3``: LightGBM sizes each
  row's output by the header's ``num_class`` and its objective writes three
  probabilities into it (heap corruption; the server died at the first
  ``predict``), while the raw scores agreed with a one-class reading (every
  probability 1.0);
* ``num_tree_per_iteration`` larger than ``num_class``: the raw scores are summed
  into ``num_tree_per_iteration`` outputs of a ``num_class`` buffer.

So, as LightGBM reads the text (a header ``key=value`` line per key up to the
first ``Tree=``, the last value of a key winning; a tree's ``key=value`` lines up
to a blank line, at most 22), :func:`check_lightgbm_text` refuses, naming the
disagreement:

* header: a key given twice, a line with two ``=`` (LightGBM refuses it too, but
  for ``feature_names`` and ``monotone_constraints``), a missing ``num_class`` /
  ``num_tree_per_iteration`` / ``label_index`` / ``max_feature_idx`` /
  ``feature_names`` / ``feature_infos``; ``num_tree_per_iteration`` other than
  ``num_class`` (LightGBM writes one tree per class and iteration, and one per
  iteration otherwise); ``feature_names``, ``feature_infos`` and
  ``monotone_constraints`` not ``max_feature_idx + 1`` entries; a
  ``feature_infos`` entry that is not ``none``, ``[min:max]`` or category values
  (LightGBM's ``dump_model`` indexes into it unchecked); ``label_index``
  negative;
* objective: a name LightGBM does not know; a parameter given twice or not a
  number; ``multiclass`` / ``multiclassova`` without ``num_class:K`` equal to the
  header's ``num_class`` (K >= 2), any other objective with a header
  ``num_class`` other than 1; a ``sigmoid`` that is not a positive number;
* trees: not a whole number of iterations (``num_class`` trees each), numbered
  out of order, a ``tree_sizes`` list of another length, a key given twice or a
  line without ``=`` in a tree, more than 22 lines, text between trees, no
  ``end of trees``; and in each tree (:func:`_check_lightgbm_tree`) the node and
  leaf arrays of ``num_leaves - 1`` / ``num_leaves`` entries, children as node
  ``k >= 0`` or leaf ``~k`` each reached once from the root, split features up to
  ``max_feature_idx``, split by category exactly where ``feature_infos`` lists the
  feature's categories and by threshold where it gives its range, thresholds finite
  or ``inf`` (a split of missing values from every number, as LightGBM writes it on
  data with gaps), leaf values and statistics (weights, counts, gains) finite
  numbers, categorical boundaries; every number below 1e300 in size (LightGBM's
  dump, which the parser reads, writes any larger one as 1e300);
* after the trees: the ``parameters:`` section's lines each ``[name: value]`` (a
  file cut short inside it ended the process), the ``pandas_categorical`` line
  JSON (one list of categories per categorical column); no NUL character anywhere
  (LightGBM reads a C string, which would end there).

:func:`lightgbm_text` normalises line endings and drops ``tree_sizes`` once it
is known to list one size per tree (LightGBM then reads tree by tree instead of
trusting byte offsets that a Windows checkout or a hand edit has shifted).
Both names are importable from :mod:`core.intake.parsing.validate`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

from core.intake.parsing.filecheck import MAX_CLASSES, MAX_LEAF_VALUE, _damaged, _first_visit, _int, check_json_depth

__all__ = ["check_lightgbm_text", "lightgbm_text", "OBJECTIVES"]

#: the objectives LightGBM's ``ObjectiveFunction::CreateObjectiveFunction`` knows by name
OBJECTIVES = ("regression", "regression_l1", "quantile", "huber", "fair", "poisson", "binary", "lambdarank",
              "rank_xendcg", "multiclass", "multiclassova", "cross_entropy", "cross_entropy_lambda", "mape",
              "gamma", "tweedie", "custom")
_MULTICLASS = ("multiclass", "multiclassova")
_MAX_TREE_LINES = 22          # Tree::Tree reads at most this many key=value lines
_INFO_RANGE = re.compile(r"\[([^:\[\]]+):([^:\[\]]+)\]")
_INFO_CATEGORIES = re.compile(r"-?\d+(:-?\d+)*")


def lightgbm_text(data: bytes, filename: str = "model.txt") -> str:
    """LightGBM model text ready for ``lgb.Booster(model_str=...)``: checked by
    :func:`check_lightgbm_text`, line endings normalised, ``tree_sizes`` dropped."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _damaged(filename, "it is not UTF-8 text") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    check_lightgbm_text(text, filename)
    return "\n".join(line for line in text.split("\n") if not line.startswith("tree_sizes="))


def _tokens(s: str, sep: str = " ") -> list[str]:
    """``s`` split as LightGBM's ``Common::Split`` does: on ``sep``, empty pieces dropped."""
    return [t for t in s.split(sep) if t]


def _ints(s: str, filename: str, what: str) -> list[int]:
    try:
        return [int(v) for v in s.split()]
    except ValueError:
        raise _damaged(filename, f"{what} holds something that is not a whole number") from None


def _floats(s: str, filename: str, what: str, *, up_to_inf: bool = False) -> list[float]:
    """The numbers of ``s``, each below :data:`~core.intake.parsing.filecheck.MAX_LEAF_VALUE` in
    size; ``up_to_inf``: ``inf`` is one of them (a threshold: LightGBM writes ``inf`` for a split
    that sends every number left and missing values to their side). LightGBM's own dump, which
    the parser reads, writes every number beyond 1e300 as 1e300: a leaf of 1e305 would be read
    as another model, and a finite threshold of 1e300 as the split of missing values."""
    try:
        out = [float(v) for v in s.split()]
    except ValueError:
        raise _damaged(filename, f"{what} holds something that is not a number") from None
    for v in out:
        if not (abs(v) < MAX_LEAF_VALUE or (up_to_inf and v == math.inf)):
            why = ("an infinite or NaN value" if not math.isfinite(v) else
                   f"beyond the {MAX_LEAF_VALUE:.0e} in size that LightGBM's dump writes")
            raise _damaged(filename, f"{what} holds {v!r}, {why}")
    return out


def _numbers(s: str, key: str, where: str, filename: str) -> list[Any]:
    """A tree's statistics line (weights, counts, gains): whole numbers for counts, else
    numbers, all finite. LightGBM reads ``nan`` here and writes it into its JSON dump, which
    its own reader then refuses (``JSONDecodeError``)."""
    if key.endswith("count"):
        return _ints(s, filename, f"{where}'s {key}")
    return _floats(s, filename, f"{where}'s {key}")


def _header(lines: list[str], filename: str) -> dict[str, str]:
    """The header's ``key -> value`` as LightGBM reads it; a key given twice (LightGBM
    would take the last, these checks the first) or a line it refuses is refused."""
    out: dict[str, str] = {}
    for line in lines:
        parts = _tokens(line, "=")
        if not parts:
            continue
        key = parts[0]
        if len(parts) > 2 and key not in ("feature_names", "monotone_constraints"):
            raise _damaged(filename, f"its header line {line[:60]!r} has more than one '='")
        if key in out:
            raise _damaged(filename, f"its header gives {key} twice")
        out[key] = line.split("=", 1)[1].strip() if len(parts) > 1 else ""
    return out


def _check_objective(objective: str, n_class: int, filename: str) -> None:
    """The objective line against the header's ``num_class`` (see the module docstring)."""
    words = _tokens(objective)
    if not words:
        raise _damaged(filename, "its objective line is empty")
    kind = words[0]
    if kind not in OBJECTIVES:
        raise _damaged(filename, f"its objective {kind[:40]!r} is not one LightGBM knows")
    params = _objective_params(words[1:], filename)
    _check_objective_classes(kind, params, n_class, filename)
    if kind in ("binary", "multiclassova") or "sigmoid" in params:
        s = params.get("sigmoid")
        if s is None or not math.isfinite(s) or s <= 0:
            raise _damaged(filename, f"its objective's sigmoid is {'missing' if s is None else _num(s)}, "
                                     "not a positive number")


def _objective_params(words: list[str], filename: str) -> dict[str, float]:
    """The objective's ``key:value`` parameters, each a number given once; flags are skipped."""
    params: dict[str, float] = {}
    for word in words:
        pieces = _tokens(word, ":")
        if len(pieces) != 2:
            continue                                  # a flag such as "sqrt" (the parser decides on it)
        key, value = pieces
        if key in params:
            raise _damaged(filename, f"its objective gives {key} twice")
        try:
            params[key] = float(value)
        except ValueError:
            raise _damaged(filename, f"its objective's {key} is {value[:40]!r}, not a number") from None
    return params


def _check_objective_classes(kind: str, params: dict[str, float], n_class: int, filename: str) -> None:
    """The objective's number of classes against the header's ``num_class``."""
    if kind in _MULTICLASS:
        k = params.get("num_class")
        if k is None:
            raise _damaged(filename, f"its objective {kind} does not say its num_class")
        if k != n_class:
            raise _damaged(filename, f"its objective says num_class:{_num(k)} but its header num_class={n_class}")
        if n_class < 2:
            raise _damaged(filename, f"its objective {kind} needs at least 2 classes, its num_class is {n_class}")
    elif kind != "custom" and n_class != 1:
        raise _damaged(filename, f"its objective {kind} has one output but its header num_class={n_class}")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


def _check_feature_infos(infos: list[str], names: list[str], filename: str) -> str:
    """Each feature's kind as ``feature_infos`` says it, one letter each: ``n`` unused
    (``none``), ``r`` numerical (``[min:max]``), ``c`` categorical (its values)."""
    kinds = []
    for j, info in enumerate(infos):
        if info == "none" or _INFO_CATEGORIES.fullmatch(info):
            kinds.append("n" if info == "none" else "c")
            continue
        m = _INFO_RANGE.fullmatch(info)
        try:
            lo, hi = (float(m.group(1)), float(m.group(2))) if m else (math.nan, math.nan)
        except ValueError:
            lo = hi = math.nan
        if not lo <= hi:
            raise _damaged(filename, f"feature_infos of feature {j} ({names[j][:40]!r}) is {info[:40]!r}, not "
                                     "'none', '[min:max]' or its category values")
        kinds.append("r")
    return "".join(kinds)


def check_lightgbm_text(text: str, filename: str = "model.txt") -> None:
    """Check LightGBM model text (LF line endings) before LightGBM reads it."""
    rest = _check_start(text, filename)
    hdr = _header(text.partition("\nTree=")[0].split("\n"), filename)
    for key in ("num_class", "num_tree_per_iteration", "label_index", "max_feature_idx", "feature_names",
                "feature_infos"):
        if key not in hdr:
            raise _damaged(filename, f"its header has no {key}")
    max_idx = _int(hdr["max_feature_idx"], filename, "max_feature_idx")
    n_class, per_iter = _check_outputs(hdr, filename)
    kinds = _check_features(hdr, max_idx, filename)
    if "objective" in hdr:
        _check_objective(hdr["objective"], n_class, filename)
    blocks, tail = _tree_blocks(rest, hdr, per_iter, filename)
    for t, block in enumerate(blocks):
        _check_lightgbm_tree(_tree_lines(block, t, filename), t, kinds, filename)
    _check_parameters(tail, filename)
    _check_pandas_categorical(text, filename)


def _check_start(text: str, filename: str) -> str:
    """The text after the header's first ``Tree=``; refuses a NUL or a text not shaped as a model."""
    if "\x00" in text:       # LightGBM reads a C string: the text would end there, in the middle of a line
        raise _damaged(filename, f"it holds a NUL character (at {text.index(chr(0)):,})")
    _, sep, rest = text.partition("\nTree=")
    if not text.startswith("tree") or not sep:
        if "Tree=" not in text:
            raise _damaged(filename, "it is not LightGBM model text (no 'tree' header or no 'Tree=' block)")
        raise _damaged(filename, "its header does not start with 'tree'")
    return rest


def _check_outputs(hdr: dict[str, str], filename: str) -> tuple[int, int]:
    """The header's ``num_class`` and ``num_tree_per_iteration`` (equal), after ``label_index``."""
    n_class = _int(hdr["num_class"], filename, "num_class")
    per_iter = _int(hdr["num_tree_per_iteration"], filename, "num_tree_per_iteration")
    if _int(hdr["label_index"], filename, "label_index") < 0:
        raise _damaged(filename, f"its label_index is {hdr['label_index'][:20]}")
    if not 1 <= n_class <= MAX_CLASSES:
        raise _damaged(filename, f"num_class is {n_class:,}")
    if per_iter != n_class:
        raise _damaged(filename, f"num_tree_per_iteration is {per_iter:,} but num_class is {n_class:,} (LightGBM "
                                 "grows one tree per class and iteration)")
    return n_class, per_iter


def _check_features(hdr: dict[str, str], max_idx: int, filename: str) -> str:
    """The per-feature header lines, ``max_feature_idx + 1`` entries each; each feature's kind."""
    names = _tokens(hdr["feature_names"])
    if max_idx < 0 or len(names) != max_idx + 1:
        raise _damaged(filename, f"max_feature_idx is {max_idx} but it names {len(names)} features")
    infos = _tokens(hdr["feature_infos"])
    if len(infos) != max_idx + 1:
        raise _damaged(filename, f"feature_infos has {len(infos)} entries for {max_idx + 1} features")
    kinds = _check_feature_infos(infos, names, filename)
    if "monotone_constraints" in hdr:
        mono = _tokens(hdr["monotone_constraints"])
        if len(mono) != max_idx + 1 or any(m not in ("-1", "0", "1") for m in mono):
            raise _damaged(filename, f"monotone_constraints is not one of -1, 0, 1 for each of its {max_idx + 1} "
                                     "features")
    return kinds


def _tree_blocks(rest: str, hdr: dict[str, str], per_iter: int, filename: str) -> tuple[list[str], str]:
    """The trees' text blocks (whole iterations, as many as ``tree_sizes`` lists) and the text after them."""
    body, end, tail = ("Tree=" + rest).partition("\nend of trees")
    if not end:
        raise _damaged(filename, "it has no 'end of trees' line after its trees")
    blocks = [b for b in body.split("\nTree=") if b.strip()]
    n_trees = len(blocks)
    if n_trees % per_iter:
        raise _damaged(filename, f"it holds {n_trees} trees, not a whole number of iterations of {per_iter} "
                                 f"(num_tree_per_iteration)")
    sizes = hdr.get("tree_sizes")
    if sizes is not None and len(sizes.split()) != n_trees:
        raise _damaged(filename, f"tree_sizes lists {len(sizes.split())} trees but it holds {n_trees}")
    return blocks, tail


def _check_parameters(tail: str, filename: str) -> None:
    """The ``parameters:`` section after the trees, as LightGBM writes it and reads it back:
    each line up to ``end of parameters`` (or the end of the text) a ``[name: value]`` pair. A
    line cut short (a file cut inside the section: ``[num_thre``, ``[machine_list_filename:``)
    made LightGBM read past its buffer and end the process, or fail with ``std::bad_alloc``."""
    lines = tail.split("\n")
    if "parameters:" not in lines:
        return
    for line in lines[lines.index("parameters:") + 1:]:
        if line == "end of parameters":
            return
        if line.strip() and not (line.startswith("[") and line.endswith("]") and ": " in line):
            raise _damaged(filename, f"its parameters line {line[:40]!r} is not '[name: value]' (the file was cut "
                                     "short or edited)")


def _check_pandas_categorical(text: str, filename: str) -> None:
    """The ``pandas_categorical:`` line, found as LightGBM's Python package finds it (the last
    line of the text) and read as it reads it (JSON): none, or one list of category values per
    categorical column. Text that is not JSON made LightGBM raise ``JSONDecodeError``."""
    key = "pandas_categorical:"
    last = text[text.rfind("\n", 0, -len(key)):].strip()
    if not last.startswith(key):
        return
    raw = last[len(key):]
    check_json_depth(raw.encode(), filename)
    try:
        value = json.loads(raw)
    except ValueError:
        raise _damaged(filename, f"its pandas_categorical line holds {raw[:40]!r}, not JSON") from None
    scalar = (str, int, float, bool, type(None))
    if value is not None and not (isinstance(value, list) and all(
            isinstance(levels, list) and all(isinstance(v, scalar) for v in levels) for levels in value)):
        raise _damaged(filename, "its pandas_categorical line is not one list of category values per "
                                 "categorical column")


def _tree_lines(block: str, t: int, filename: str) -> dict[str, str]:
    """Tree ``t``'s ``key -> value`` as LightGBM's ``Tree`` reads them: the lines after
    ``Tree=t`` up to a blank line; then nothing but blank lines before the next tree."""
    lines = block.split("\n")
    first = lines[0].removeprefix("Tree=").strip()
    if _int(first, filename, f"tree {t}'s number") != t:
        raise _damaged(filename, f"tree {t} is numbered {first!r}")
    kv: dict[str, str] = {}
    i = 1
    while i < len(lines) and lines[i]:
        key, eq, value = lines[i].partition("=")
        if not eq:
            raise _damaged(filename, f"tree {t}'s line {lines[i][:40]!r} is not 'key=value'")
        if key in kv:
            raise _damaged(filename, f"tree {t} gives {key} twice")
        kv[key] = value
        i += 1
    if len(kv) > _MAX_TREE_LINES:
        raise _damaged(filename, f"tree {t} has {len(kv)} lines; LightGBM reads at most {_MAX_TREE_LINES}")
    extra = next((line for line in lines[i:] if line.strip()), None)
    if extra is not None:
        raise _damaged(filename, f"after tree {t} comes {extra[:40]!r}, not another tree")
    return kv


def _check_statistics(kv: dict[str, str], n_leaves: int, where: str, filename: str) -> None:
    """A tree's lines besides its structure: its leaves' weights and counts (one each), a
    linear tree's constants and features, the internal nodes' gains, values, weights and
    counts (one each), its shrinkage; all finite numbers (:func:`_numbers`)."""
    linear = kv.get("is_linear", "0").strip() not in ("0", "")
    # LightGBM writes a one-leaf tree (a model that found no split) with an empty leaf_weight,
    # which it does not read (Tree::Tree returns before it)
    for key in ("leaf_weight", "leaf_count") if n_leaves > 1 or linear else ("leaf_count",):
        if key in kv and len(_numbers(kv[key], key, where, filename)) != n_leaves:
            raise _damaged(filename, f"{where} has num_leaves={n_leaves} but {len(kv[key].split())} {key}")
    if linear:
        _check_linear_leaves(kv, n_leaves, where, filename)
    if n_leaves > 1:
        _check_internal_statistics(kv, n_leaves - 1, where, filename)
    if "shrinkage" in kv:
        _numbers(kv["shrinkage"], "shrinkage", where, filename)


class _TreeArrays(NamedTuple):
    """One tree's node arrays as its text gives them, with what the messages name it by."""

    where: str
    filename: str
    kinds: str
    n_leaves: int
    n_cat: int
    feat: list[int]
    dec: list[int]
    left: list[int]
    right: list[int]
    thr: list[float]


def _check_linear_leaves(kv: dict[str, str], n_leaves: int, where: str, filename: str) -> None:
    """A linear tree's constants and feature counts: one per leaf."""
    for key in ("leaf_const", "num_features"):
        if key in kv and len(kv[key].split()) != n_leaves:
            raise _damaged(filename, f"{where}'s {key} does not have {n_leaves} entries")


def _check_internal_statistics(kv: dict[str, str], m: int, where: str, filename: str) -> None:
    """The internal nodes' gains, values, weights and counts: ``m`` numbers each."""
    for key in ("split_gain", "internal_value", "internal_weight", "internal_count"):
        if key in kv and len(_numbers(kv[key], key, where, filename)) != m:
            raise _damaged(filename, f"{where} has {m} internal nodes but {len(kv[key].split())} {key}")


def _check_lightgbm_tree(kv: dict[str, str], t: int, kinds: str, filename: str) -> None:
    """Tree ``t``'s arrays and nodes; ``kinds``: each feature's kind (:func:`_check_feature_infos`)."""
    where = f"tree {t}"
    n_leaves = _check_leaves(kv, where, filename)
    _check_statistics(kv, n_leaves, where, filename)
    m = n_leaves - 1
    if m == 0:
        return
    ints, thr = _split_arrays(kv, n_leaves, where, filename)
    n_cat = _check_categories(kv, m, where, filename)
    tree = _TreeArrays(where, filename, kinds, n_leaves, n_cat, ints["split_feature"], ints["decision_type"],
                       ints["left_child"], ints["right_child"], thr)
    _walk_tree(tree)


def _check_leaves(kv: dict[str, str], where: str, filename: str) -> int:
    """The tree's ``num_leaves`` (at least 1), with as many leaf values."""
    if "num_leaves" not in kv:
        raise _damaged(filename, f"{where} has no num_leaves")
    n_leaves = _int(kv["num_leaves"], filename, f"{where}'s num_leaves")
    if n_leaves < 1:
        raise _damaged(filename, f"{where} has num_leaves {n_leaves}")
    leaf_value = _floats(kv.get("leaf_value", ""), filename, f"{where}'s leaf_value")
    if len(leaf_value) != n_leaves:
        raise _damaged(filename, f"{where} has num_leaves={n_leaves} but {len(leaf_value)} leaf values")
    return n_leaves


def _split_arrays(kv: dict[str, str], n_leaves: int, where: str,
                  filename: str) -> tuple[dict[str, list[int]], list[float]]:
    """The internal nodes' integer arrays by key, and their thresholds; ``num_leaves - 1`` entries each."""
    m = n_leaves - 1
    ints: dict[str, list[int]] = {}
    thr: list[float] = []
    for key in ("split_feature", "threshold", "decision_type", "left_child", "right_child"):
        if key not in kv:
            raise _damaged(filename, f"{where} has no {key}")
        if key == "threshold":
            thr = _floats(kv[key], filename, f"{where}'s {key}", up_to_inf=True)
            held = len(thr)
        else:
            ints[key] = _ints(kv[key], filename, f"{where}'s {key}")
            held = len(ints[key])
        if held != m:
            raise _damaged(filename, f"{where} has num_leaves={n_leaves}, so {m} {key} entries, but holds {held}")
    return ints, thr


def _check_categories(kv: dict[str, str], m: int, where: str, filename: str) -> int:
    """The tree's ``num_cat`` (category sets, at most one per internal node), its boundaries
    indexing ``cat_threshold`` in order."""
    n_cat = _int(kv.get("num_cat", "0"), filename, f"{where}'s num_cat")
    if not 0 <= n_cat <= m:
        raise _damaged(filename, f"{where} has num_cat={n_cat} for {m} internal nodes")
    if n_cat:
        bounds = _ints(kv.get("cat_boundaries", ""), filename, f"{where}'s cat_boundaries")
        cat_words = len(_ints(kv.get("cat_threshold", ""), filename, f"{where}'s cat_threshold"))
        if (len(bounds) != n_cat + 1 or bounds[0] != 0 or bounds[-1] != cat_words
                or any(b < a for a, b in zip(bounds, bounds[1:]))):
            raise _damaged(filename, f"{where}'s cat_boundaries do not index its cat_threshold")
    return n_cat


def _walk_tree(tree: _TreeArrays) -> None:
    """Every node from the root: its split checked, each node and leaf reached exactly once."""
    m = tree.n_leaves - 1
    seen_node, seen_leaf = bytearray(m), bytearray(tree.n_leaves)
    stack = [0]
    while stack:
        i = stack.pop()
        _first_visit(seen_node, i, tree.where, tree.filename)
        _check_node_split(tree, i)
        for side, c in (("left", tree.left[i]), ("right", tree.right[i])):
            if c >= 0:
                _check_child_node(tree, i, side, c, seen_node)
                stack.append(c)
            else:
                _reach_leaf(tree, i, side, ~c, seen_leaf)
    if not all(seen_node) or not all(seen_leaf):
        raise _damaged(tree.filename, f"{tree.where}: {m - sum(seen_node)} nodes and "
                                      f"{tree.n_leaves - sum(seen_leaf)} leaves are not reached from the root")


def _check_node_split(tree: _TreeArrays, i: int) -> None:
    """Node ``i``'s feature, decision type, and split kind against ``feature_infos``."""
    where, filename, feat, dec = tree.where, tree.filename, tree.feat, tree.dec
    max_idx = len(tree.kinds) - 1
    if not 0 <= feat[i] <= max_idx:
        raise _damaged(filename, f"{where}, node {i} splits on feature {feat[i]}, outside 0..{max_idx}")
    if not 0 <= dec[i] <= 255:
        raise _damaged(filename, f"{where}, node {i} has decision_type {dec[i]}")
    kind = tree.kinds[feat[i]]
    if kind != ("c" if dec[i] & 1 else "r"):
        said = {"n": "unused", "r": "numerical", "c": "categorical"}[kind]
        raise _damaged(filename, f"{where}, node {i} splits feature {feat[i]} "
                                 f"{'by category' if dec[i] & 1 else 'by a threshold'} but feature_infos says "
                                 f"it is {said}")
    thr = tree.thr[i]
    if dec[i] & 1 and (not math.isfinite(thr) or thr != int(thr) or not 0 <= thr < tree.n_cat):
        # categorical: threshold indexes cat_boundaries
        raise _damaged(filename, f"{where}, node {i} is categorical with category set {thr!r}, "
                                 f"outside 0..{tree.n_cat - 1}")


def _check_child_node(tree: _TreeArrays, i: int, side: str, c: int, seen_node: bytearray) -> None:
    """An internal child ``c`` of node ``i``: inside the tree, not the root, not reached before."""
    m = tree.n_leaves - 1
    if c >= m:
        raise _damaged(tree.filename, f"{tree.where}, node {i}: {side} child {c} is outside 0..{m - 1}")
    if c == 0 or seen_node[c]:
        raise _damaged(tree.filename, f"{tree.where}, node {i}: {side} child {c} points back to an ancestor "
                                      "or is shared")


def _reach_leaf(tree: _TreeArrays, i: int, side: str, leaf: int, seen_leaf: bytearray) -> None:
    """Leaf ``leaf`` (a child ``~leaf`` of node ``i``): inside the tree and reached once, then marked."""
    if leaf >= tree.n_leaves:
        raise _damaged(tree.filename, f"{tree.where}, node {i}: {side} child is leaf {leaf}, outside "
                                      f"0..{tree.n_leaves - 1}")
    if seen_leaf[leaf]:
        raise _damaged(tree.filename, f"{tree.where}, leaf {leaf} is reached twice")
    seen_leaf[leaf] = 1
