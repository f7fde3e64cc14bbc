"""Glyphs shipped in the report's page: the subset covers exactly the page's characters, carries its licence, and
never comes from a font that forbids embedding or draws placeholders."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import matplotlib
from fontTools.ttLib import TTFont

from argmaxable.glyphs import FAMILY, font_faces, read_fonts

MPL_FONTS = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
DEJAVU = MPL_FONTS / "DejaVuSans.ttf"  # ships with matplotlib: covers Hebrew and Arabic, not CJK
HEBREW = "שלום"


def _embedded(css: str) -> TTFont:
    data = re.search(r"base64,([A-Za-z0-9+/=]+)", css).group(1)
    return TTFont(io.BytesIO(base64.b64decode(data)))


def test_the_subset_holds_the_pages_characters_and_names_its_licence():
    css, note = font_faces(f"token {HEBREW} — Ωж", [DEJAVU])
    assert f"font-family:'{FAMILY}'" in css and "format('woff')" in css
    assert re.search(r"unicode-range:([^}]*)", css).group(1).split(",") == [f"U+{ord(c):04X}" for c in sorted(
        set(HEBREW))]
    font = _embedded(css)
    assert set(font.getBestCmap()) == {ord(c) for c in HEBREW}  # the subset: nothing else (not — Ω ж)
    assert font.flavor == "woff" and len(base64.b64decode(re.search(r"base64,([^)]*)", css).group(1))) < 10_000
    assert "4 characters outside Latin: 4 from DejaVu Sans" in note and "Bitstream" in note  # its copyright


def test_characters_no_font_covers_are_left_to_the_readers_fonts():
    css, note = font_faces(f"{HEBREW} 中文", [DEJAVU])
    assert css.count("@font-face") == 1
    assert "6 characters outside Latin: 4 from DejaVu Sans" in note and "2 left to the reader's fonts" in note
    assert font_faces("plain Latin, — and Ω", [DEJAVU]) == ("", "")  # nothing to ship, no font read


def test_fonts_that_forbid_embedding_or_draw_placeholders_are_never_used(tmp_path):
    font = TTFont(str(DEJAVU))
    font["OS/2"].fsType = 0x0002  # restricted licence embedding
    font.save(str(tmp_path / "restricted.ttf"))
    assert read_fonts([tmp_path / "restricted.ttf"]) == []
    last_resort = next(MPL_FONTS.glob("LastResort*.ttf"))  # maps every code point to a few placeholder glyphs
    assert read_fonts([last_resort]) == [] and [f.name for f in read_fonts([DEJAVU])] == ["DejaVu Sans"]
    css, note = font_faces(HEBREW, [tmp_path / "restricted.ttf", last_resort])
    assert css == "" and "none (no font of the machine that built it covers them)" in note
