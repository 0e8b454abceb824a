"""The sidebar's page icons render in a browser without an emoji font (#38 item 4).

Headless Chromium here has no emoji font, as many work machines: an emoji icon is
an empty box there. Each page's icon must be one of Streamlit's Material Symbols,
drawn from the font the app serves itself: the glyph is an icon (about 20 px
wide), not its name spelled out in letters (what a missing font would show).
"""

from __future__ import annotations

import pytest
from browser_util import app_view, shots_dir

from dashboard.pages_registry import PAGES

pytestmark = pytest.mark.browser


def test_every_page_icon_is_a_material_symbol():
    for items in PAGES.values():
        for _, title, icon in items:
            assert icon.startswith(":material/") and icon.endswith(":"), (title, icon)


def test_the_sidebar_icons_render_without_an_emoji_font(app_url, tmp_path):
    shots = shots_dir(tmp_path)
    with app_view(app_url, "/", "Data & model", shots / "sidebar_icons.png") as page:
        nav = page.locator('[data-testid="stSidebarNav"]')
        links = nav.locator("a")
        links.first.wait_for(timeout=90_000)
        titles = [t for items in PAGES.values() for _, t, _ in items]
        assert links.count() == len(titles)
        assert nav.locator('[data-testid="stIconEmoji"]').count() == 0
        icons = nav.locator('[data-testid="stSidebarNavLink"] [data-testid="stIconMaterial"]')
        assert icons.count() == len(titles), nav.inner_html()[:2000]
        # document.fonts.status is "loaded" as long as no font is loading, so also before the
        # icons' font has been asked for (on a busy machine: families was [] twice in five
        # runs); wait for that font itself to be loaded
        loaded = "() => [...document.fonts].filter(f => f.status === 'loaded').map(f => f.family)"
        page.wait_for_function(f"({loaded})().some(f => f.includes('Material Symbols'))", timeout=30_000)
        families = page.evaluate(loaded)
        assert any("Material Symbols" in f for f in families), families
        for k in range(icons.count()):
            box = icons.nth(k).bounding_box()
            assert box is not None and 8 <= box["width"] <= 32, (titles[k], box, icons.nth(k).inner_text())
        favicon = page.locator('link[rel~="icon"]').first.get_attribute("href") or ""
        assert not favicon.startswith("http") and "gstatic" not in favicon, favicon   # drawn locally
