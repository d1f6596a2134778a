"""Deterministic corpus of hard strings for the tokenizer gate (>= 500 strings).

Categories: emoji and ZWJ sequences, CJK, Thai, Khmer, Arabic, Devanagari, digit runs, whitespace
runs, tabs/newlines, code, special-token look-alikes, mixed scripts, combining marks, contractions.
`invalid_utf8_corpus()` holds byte strings that are not valid UTF-8: memra repairs them to U+FFFD
exactly like bytes.decode("utf-8", "replace"), so the oracle encodes the repaired string.
"""
import random

EMOJI = ["😀", "🦙", "👍🏽", "🇫🇷", "🇯🇵", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍💻", "❤️", "🫠", "👩‍❤️‍💋‍👨", "1️⃣", "©️", "🤷‍♀️"]
CJK = ["你好世界", "東京は日本の首都です", "한국어 텍스트", "漢字かなカナ", "中文，标点。", "ｆｕｌｌｗｉｄｔｈ", "我爱北京天安门"]
THAI = ["สวัสดีครับ", "ภาษาไทยไม่มีช่องว่าง", "กรุงเทพมหานคร"]
KHMER = ["ភាសាខ្មែរ", "សួស្តី", "ព្រះរាជាណាចក្រកម្ពុជា"]
ARABIC = ["مرحبا بالعالم", "اللغة العربية", "١٢٣ ٤٥٦", "שלום עולם", "فارسی‌نویسی"]
INDIC = ["नमस्ते दुनिया", "हिन्दी", "தமிழ்", "ক্ষ্ম"]
LATIN = ["Äpfel", "naïve café", "Ελληνικά", "Русский язык", "Ünïcödé", "ﬁnancial", "straße", "İstanbul"]
COMBINING = ["e\u0301", "a\u0308\u0304", "n\u0303o", "\u0915\u094d\u0937", "Z\u0351\u036b\u0343"]
CODE = [
    "def f(x):\n    return x**2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "if x != y && z >= 3 || !w { panic!(\"boom\"); }",
    "<div class=\"a\">Hello</div>",
    "SELECT * FROM t WHERE id=42;",
    "x = [1,2,3]; y = {'a': 1}",
    "#include <stdio.h>\nint main(){printf(\"%d\\n\", 1);}",
    "   \t// comment with trailing spaces   ",
    "console.log(`template ${x}`);",
    "$ ls -la | grep '.py' > out.txt 2>&1",
]
SPECIAL_LOOKALIKES = [
    "<|endoftext|>", "<|im_start|>user", "<|im_end|>", "<s>", "</s>", "<bos>", "<eos>", "<unk>",
    "<start_of_turn>user\nhi<end_of_turn>", "<|eot_id|>", "<|begin_of_text|>", "< |im_start| >",
    "<|im_start", "im_start|>", "<<s>>", "<0x41>", "[INST] hi [/INST]", "<pad>", "<mask>",
    "<unused0>", "<|fim_prefix|>", "<｜begin▁of▁sentence｜>", "<table>", "</div>", "[multimodal]",
]
CONTRACTIONS = ["I'm", "you're", "he'll", "they've", "it's", "I'D", "WE'LL", "don't", "'s", "''", "O'Neil's"]
PUNCT = ["!!!", "?!", "...", "—", "–", "«»", "„“", "¿¡", "()[]{}", "@#$%^&*", "~`|\\", "''\"\""]


def _digit_runs(rng):
    out = []
    for n in [1, 2, 3, 4, 5, 6, 7, 10, 16, 33]:
        out.append("".join(rng.choice("0123456789") for _ in range(n)))
    out += ["3.14159", "1,000,000", "-42", "0x1F", "1e-9", "2024-11-29", "٣٤٥", "१२३", "½¾²³", "①②"]
    return out


def _whitespace(rng):
    out = []
    for ws in [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\u00a0",
               "\u3000", "\u2009", "\u200b", " \t\n", "\n \n", "        ", "\x0b", "\x0c", "\u0085"]:
        out += [ws, "a" + ws + "b", ws + "x", "x" + ws]
    return out


def corpus():
    rng = random.Random(1234)
    pools = [EMOJI, CJK, THAI, KHMER, ARABIC, INDIC, LATIN, COMBINING, CODE, SPECIAL_LOOKALIKES,
             CONTRACTIONS, PUNCT]
    out = []
    for pool in pools:
        out += pool
    out += _digit_runs(rng)
    out += _whitespace(rng)
    words = [w for pool in pools for w in pool] + ["the", "Hello", "world", "tokenizer", "a", "I"]
    seps = [" ", "  ", "", "\n", "\t", " \n", ", ", ". ", "123", "   "]
    while len(out) < 620:
        n = rng.randint(1, 8)
        s = ""
        for _ in range(n):
            s += rng.choice(words) + rng.choice(seps)
        if rng.random() < 0.3:
            s = rng.choice(["", " ", "  ", "\n"]) + s
        out.append(s)
    # Long-ish strings: repeated words, long whitespace and digit runs.
    out += ["word " * 200, " " * 300, "\n" * 40, "9" * 100, "🦙" * 50, "ab" * 150 + "!"]
    return out


def invalid_utf8_corpus():
    return [
        b"\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\xa6",
        b"\xf0\x9f\xa6\x99\xf0", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf5\x80\x80\x80", b"\xfe\xff",
        b"hello \x80\x81\x82 world", b"\xe0\x80\x80", b"\xf4\x90\x80\x80", b" \xa0 ", b"\x00nul",
    ]
