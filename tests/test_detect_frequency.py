"""The common CJK characters are the standards' most-frequent sets, whose sizes the standards publish."""

from argmaxable.detect.frequency import BIG5_FREQUENT, GB2312_LEVEL1, JIS_LEVEL1, _in, cjk_frequency

IDEOGRAPHS = [chr(c) for c in (*range(0x3400, 0xA000), *range(0xF900, 0xFB00))]


def test_the_most_frequent_sets_have_the_sizes_the_standards_print():
    def count(codec, lead, whole=False):
        return sum(1 for ch in IDEOGRAPHS if (b := _in(ch, codec)) and len(b) == 2
                   and (int.from_bytes(b, "big") if whole else b[0]) in lead)

    # GB 2312 level 1: 3755 hanzi; JIS X 0208 level 1: 2965 kanji; Big5 frequently used: 5401
    assert (count("gb2312", GB2312_LEVEL1), count("euc_jp", JIS_LEVEL1), count("big5", BIG5_FREQUENT, True)) == (
        3755, 2965, 5401)


def test_common_in_any_standard_rare_in_none_and_no_class_for_other_tokens():
    assert [cjk_frequency(t) for t in ("国", "琛", "鑫", "冇")] == ["common", "common", "rare", "rare"]
    assert [cjk_frequency(t) for t in ("A", "ア", "。", "中文", "")] == ["", "", "", "", ""]
