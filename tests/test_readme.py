"""The README is short, has a table of contents, and what it shows runs (issue #64 item 9).

* Every ```python block of README.md runs, in the order of the file and in one namespace,
  as a reader pasting them one after the other would: a block of ``>>>`` lines is a doctest
  (its printed output must match, with ``...`` for a part left out), any other block is
  run as a script. A block that raises, or prints something else than it shows, fails.
* README.md has at most 2,000 words, counted as ``wc -w`` counts them.
* It has a table of contents: a "Contents" section listing every ``##`` and ``###``
  section after it, in order, each link to its heading.
* Every relative link of README.md, CHANGELOG.md, CONTRIBUTING.md and docs/*.md points at a
  file that exists, and a link to a heading of a Markdown file at a heading it has.
"""

from __future__ import annotations

import doctest
import io
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_WORDS = 2000

_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)
_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def _documents() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [README, *[p for p in (ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md") if p.exists()], *docs]


def _prose(text: str) -> str:
    """The Markdown outside fenced code blocks (a link or heading inside one is code), each
    block blanked to its newlines so that line numbers still point into the file."""
    return _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, Markdown marks, punctuation and symbols
    dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)            # a link keeps its text
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, title in _HEADING.findall(_prose(path.read_text(encoding="utf-8"))):
        slug = _slug(title)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


@pytest.mark.slow            # about 6 CPU-seconds: seven analyses on small models
def test_every_python_block_of_the_readme_runs_in_order():
    text = README.read_text(encoding="utf-8")
    blocks = [(m.group(1), _line_of(text, m.start(1))) for m in _BLOCK.finditer(text)]
    assert len(blocks) >= 7, f"README.md shows {len(blocks)} python blocks; one per analysis is expected"
    namespace: dict = {"__name__": "readme"}
    parser = doctest.DocTestParser()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for code, line in blocks:
        where = f"README.md, the python block at line {line}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if re.search(r"^\s*>>>", code, re.M):
                test = parser.get_doctest(code, namespace, where, str(README), line - 1)
                out = io.StringIO()
                runner = doctest.DocTestRunner(optionflags=flags)
                runner.run(test, out=out.write, clear_globs=False)
                namespace = test.globs                  # the next block sees what this one made
                assert runner.failures == 0, f"{where}:\n{out.getvalue()}"
            else:
                try:
                    exec(compile(code, where, "exec"), namespace)
                except Exception as exc:                # noqa: BLE001 - reported with its block
                    pytest.fail(f"{where} raised {type(exc).__name__}: {exc}")


def test_the_readme_has_at_most_2000_words():
    words = len(README.read_text(encoding="utf-8").split())       # what `wc -w` counts
    assert words <= MAX_WORDS, f"README.md has {words} words; at most {MAX_WORDS} (move detail to docs/)"


def test_the_readme_has_a_table_of_contents_of_its_sections():
    text = _prose(README.read_text(encoding="utf-8"))
    sections = [title for hashes, title in _HEADING.findall(text) if len(hashes) in (2, 3)]
    assert sections and sections[0] == "Contents", f"the first section should be the contents, not {sections[:1]}"
    body = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\s*[-*] \[[^\]]+\]\(#([^)]+)\)", body, re.M)
    wanted = [_slug(title) for title in sections[1:]]
    assert listed == wanted, f"the contents list {listed}; the sections are {wanted}"
    assert set(listed) <= _anchors(README)


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_file_that_exists(path):
    text = _prose(path.read_text(encoding="utf-8"))
    broken = []
    for m in _LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):          # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        line = _line_of(text, m.start())
        if not dest.exists():
            broken.append(f"line {line}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"line {line}: {target} (no heading '{anchor}' in {dest.name})")
    assert not broken, f"{path.relative_to(ROOT)}:\n" + "\n".join(broken)
