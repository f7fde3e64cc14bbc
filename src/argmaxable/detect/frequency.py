"""Whether a CJK character is common: the most frequently used characters as the national standards list them.

The OCR recognisers name their categories by single characters, and no frequency list of their training text
ships with them. Three character-set standards each put their most frequently used characters in a set of their
own: GB 2312 level 1 (3755 simplified characters, chosen by frequency), JIS X 0208 level 1 (2965 kanji) and Big5's
frequently used characters (5401). Python's codecs encode all three, so a character's place needs no data file.
:func:`cjk_frequency` calls a single CJK ideograph *common* when any of the three puts it in its most frequent set
and *rare* otherwise; any other token gets no class (the LM study's token table, column ``CJK frequency``).
"""

from __future__ import annotations

import unicodedata

# (codec, the lead bytes or the code range of its most frequently used characters)
GB2312_LEVEL1 = range(0xB0, 0xD8)  # first byte of the 3755 level-1 hanzi (rows 16-55)
JIS_LEVEL1 = range(0xB0, 0xD0)  # EUC-JP first byte of the 2965 level-1 kanji (rows 16-47)
BIG5_FREQUENT = range(0xA440, 0xC67F)  # the 5401 frequently used hanzi


def _in(ch: str, codec: str) -> bytes | None:
    try:
        return ch.encode(codec)
    except UnicodeEncodeError:
        return None


def cjk_frequency(token: str) -> str:
    """"common" or "rare" for a single CJK ideograph (see the module docstring), "" for any other token.

    >>> [cjk_frequency(t) for t in ("的", "龘", "a", "中国", "<blank>")]
    ['common', 'rare', '', '', '']
    """
    if len(token) != 1 or not unicodedata.name(token, "").startswith(("CJK UNIFIED", "CJK COMPATIBILITY")):
        return ""
    gb, jis, big5 = _in(token, "gb2312"), _in(token, "euc_jp"), _in(token, "big5")
    common = (gb is not None and len(gb) == 2 and gb[0] in GB2312_LEVEL1) or \
        (jis is not None and len(jis) == 2 and jis[0] in JIS_LEVEL1) or \
        (big5 is not None and len(big5) == 2 and int.from_bytes(big5, "big") in BIG5_FREQUENT)
    return "common" if common else "rare"
