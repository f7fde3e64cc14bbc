"""Fonts shipped in the report's HTML for the characters a reader's machine may lack (CJK glyphs of OCR heads,
scripts of LLM vocabularies).

The report names unargmaxable tokens as they are: Chinese and Japanese characters of the OCR recognisers, pieces
of other scripts in LLM vocabularies. A browser draws a character only if some font it has covers it; a machine
without a CJK font (a headless browser, a minimal desktop) draws empty boxes. :func:`font_faces` finds, among
the fonts of the machine that builds the report (matplotlib's font list: the system's fonts and matplotlib's own),
those that cover the page's characters outside Latin, and returns CSS ``@font-face`` rules embedding a subset
of each (only the characters the page uses, WOFF, base64): the page then renders the same everywhere. A font
whose OS/2 ``fsType`` forbids embedding or subsetting, or that maps many characters to one glyph (a last-resort
font of placeholders), is never used; each embedded font's copyright and licence
(its own name table) are stated beside it. Characters no font covers are left to the reader's fonts (the CSS
font stack names the common CJK families) and counted in the note.

Debian's ``fonts-noto-cjk`` (SIL Open Font License 1.1, which allows embedding in documents) covers the OCR
heads' characters; ``make browser`` installs it beside Chromium.
"""

from __future__ import annotations

import base64
import io
import unicodedata
from dataclasses import dataclass
from pathlib import Path

FAMILY = "report glyphs"  # the CSS family of the embedded subsets, listed in the page's font stack
# Code points below FIRST (Latin, Greek, Cyrillic) and in COMMON (punctuation, arrows, mathematical and technical
# symbols, shapes) are in the default fonts of every desktop; the rest (Hebrew, Arabic, Indic, Thai, CJK, ...) may
# not be.
FIRST = 0x0530
COMMON = range(0x2000, 0x2C00)
RESTRICTED, NO_SUBSETTING, BITMAP_ONLY = 0x0002, 0x0100, 0x0200  # OS/2 fsType bits that rule a font out
# A font mapping this many characters or more to each glyph draws placeholders (a last-resort font), not glyphs.
PLACEHOLDERS = 10


@dataclass
class Font:
    """One font of a file (a collection holds several): what it covers and what its name table says."""

    path: Path
    number: int  # the font's index in a collection (0 for a single font)
    name: str
    licence: str
    cmap: frozenset[int]


def needed(text: str) -> set[str]:
    """The characters of ``text`` a reader's fonts may lack (at or above :data:`FIRST`, outside :data:`COMMON`) that
    draw something (no spaces, marks or controls).

    >>> sorted(needed("tie — Ωж 中文 א"))
    ['א', '中', '文']
    """
    return {ch for ch in set(text) if ord(ch) >= FIRST and ord(ch) not in COMMON
            and unicodedata.category(ch)[0] in "LNPS"}


def _name(font, ids: tuple[int, ...]) -> str:
    names = font["name"]
    return next((str(rec) for i in ids if (rec := names.getDebugName(i))), "")


def _embeddable(font) -> bool:
    fs_type = font["OS/2"].fsType if "OS/2" in font else 0
    return not fs_type & (RESTRICTED | NO_SUBSETTING | BITMAP_ONLY)


def read_fonts(paths, chars: set[str] | None = None) -> list[Font]:
    """The embeddable fonts of the given files (single fonts and collections), read in :func:`preference` order;
    with ``chars``, reading stops once the fonts read cover them all. Unreadable files are skipped."""
    from fontTools.ttLib import TTCollection, TTFont

    out, left = [], {ord(c) for c in chars} if chars is not None else None
    for path in sorted(map(Path, paths), key=preference):
        try:
            fonts = TTCollection(str(path), lazy=True).fonts if path.suffix.lower() == ".ttc" else \
                [TTFont(str(path), lazy=True)]
        except Exception:  # a font file fontTools cannot read is no candidate, whatever the error
            continue
        for number, font in enumerate(fonts):
            cmap = font.getBestCmap() or {} if "cmap" in font else {}
            if not cmap or not _embeddable(font) or len(set(cmap.values())) * PLACEHOLDERS < len(cmap):
                continue
            licence = _name(font, (13,)).split(". ")[0].rstrip(".")  # its first sentence names it
            out.append(Font(path, number, _name(font, (4, 1)),
                            "; ".join(filter(None, (_name(font, (0,)).rstrip("."), licence, _name(font, (14,))))),
                            frozenset(cmap)))
            if left is not None:
                left -= out[-1].cmap
        if left is not None and not left:
            break
    return out


def preference(path: Path) -> tuple[bool, bool, str]:
    """Sort key of font files: regular weights before others, sans before serif, then by name."""
    name = path.name.lower()
    return not any(w in name for w in ("regular", "book")) or "italic" in name, "serif" in name, name


def system_font_paths() -> list[Path]:
    """Every font file matplotlib's font manager knows: the system's and matplotlib's own."""
    from matplotlib import font_manager

    found = {Path(p) for p in font_manager.findSystemFonts()}
    found |= {Path(f.fname) for f in font_manager.fontManager.ttflist}
    return sorted(p for p in found if p.suffix.lower() in (".ttf", ".otf", ".ttc"))


def choose(chars: set[str], fonts: list[Font]) -> list[tuple[Font, set[str]]]:
    """Fonts that cover ``chars``, greedily (most new characters first; ties: the font listed first, a
    simplified-Chinese face of a collection before its other languages'), each with the characters it is used
    for."""
    fonts = sorted(fonts, key=lambda f: " SC" not in f.name)  # stable: the order of read_fonts otherwise
    left, chosen = {ord(c) for c in chars}, []
    while left:
        best = max(fonts, key=lambda f: len(left & f.cmap), default=None)
        if best is None or not left & best.cmap:
            break
        chosen.append((best, {chr(c) for c in left & best.cmap}))
        left -= best.cmap
    return chosen


def subset(font: Font, chars: set[str]) -> bytes:
    """``font`` cut down to ``chars`` as WOFF (zlib: no extra dependency), its name table kept (licence)."""
    from fontTools import subset as ft_subset

    options = ft_subset.Options()
    options.flavor = "woff"
    options.name_IDs = ["*"]
    options.name_languages = ["*"]
    options.hinting = False
    options.font_number = font.number
    loaded = ft_subset.load_font(str(font.path), options)
    sub = ft_subset.Subsetter(options)
    sub.populate(unicodes=[ord(c) for c in chars])
    sub.subset(loaded)
    buf = io.BytesIO()
    ft_subset.save_font(loaded, buf, options)
    return buf.getvalue()


def font_faces(text: str, paths=None) -> tuple[str, str]:
    """CSS ``@font-face`` rules (family :data:`FAMILY`) that ship the glyphs ``text`` needs, and one sentence
    saying what was embedded, under which licence, and what was left to the reader's fonts.

    ``paths``: the font files to choose from (default: :func:`system_font_paths`).
    """
    chars = needed(text)
    if not chars:
        return "", ""
    fonts = read_fonts(system_font_paths() if paths is None else paths, chars)
    chosen = choose(chars, fonts)
    rules, used = [], []
    for font, covered in chosen:
        data = subset(font, covered)
        ranges = ",".join(f"U+{ord(c):04X}" for c in sorted(covered))
        rules.append(f"/* {font.name}: {font.licence} */\n@font-face{{font-family:'{FAMILY}';"
                     f"src:url(data:font/woff;base64,{base64.b64encode(data).decode('ascii')}) format('woff');"
                     f"unicode-range:{ranges}}}")
        used.append(f"{len(covered)} from {font.name} ({len(data) // 1024} KiB; {font.licence or 'no licence named'})")
    left = len(chars) - sum(len(c) for _, c in chosen)
    note = (f"shipped in this page for {len(chars)} characters outside Latin: "
            f"{'; '.join(used) or 'none (no font of the machine that built it covers them)'}"
            + (f"; {left} left to the reader's fonts." if left else "."))
    return "\n".join(rules), note
