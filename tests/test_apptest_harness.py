"""The AppTest harness (tests/apptest_harness.py) changes what a run costs, not what it gives."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest


def test_a_run_gives_its_elements_and_its_exceptions():
    at = AppTest.from_string("import streamlit as st\nst.title('one')\nst.number_input('n', value=3)\n").run()
    assert [t.value for t in at.title] == ["one"] and at.number_input[0].value == 3
    at.number_input[0].set_value(5).run()
    assert at.number_input[0].value == 5
    failing = AppTest.from_string("raise ValueError('no')").run()
    assert failing.exception and "no" in failing.exception[0].message


def test_a_run_past_its_time_fails_with_the_librarys_message_and_its_own_limit():
    at = AppTest.from_string("import time\ntime.sleep(3)\n", default_timeout=0.3)
    with pytest.raises(RuntimeError, match=r"AppTest script run timed out after 0\.3\(s\)"):
        at.run()


def test_an_edited_page_is_compiled_again(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("import streamlit as st\nst.write('before')\n")
    assert AppTest.from_file(str(page)).run().markdown[0].value == "before"
    page.write_text("import streamlit as st\nst.write('after, edited')\n")
    assert AppTest.from_file(str(page)).run().markdown[0].value == "after, edited"
