"""Hugging Face `tokenizers` oracles built from GGUF vocabularies.

A GGUF holds the vocabulary, merges (or SentencePiece scores) and a pre-tokenizer *name*; this
module rebuilds the `tokenizers` pipeline that name stands for (the upstream tokenizer.json), the
same way transformers' converters do. An oracle is trusted only after it reproduces the upstream
Hugging Face ids in the test data's .inp/.out files (see test_tokenizer_parity.py), so a mistake here
turns the gate red instead of hiding a bug.
"""
import pathlib
import struct

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
CJK = "[一-龥ࠀ-一가-퟿]+"
DS_LETTERS = (
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-"
    "\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1"
    "\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-"
    "\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15"
    "\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
    "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb"
    "\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124"
    "\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184"
    "\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-"
    "\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
    "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-"
    "\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+")
DS_PUNCT = r"\s?[!-/:-~！-／：-～‘-‟　-。]+"
# Qwen2 and Qwen3.5 regexes as transformers' own tokenizer classes define them (not memra's copies).
QWEN2 = __import__("transformers.models.qwen2.tokenization_qwen2", fromlist=["x"]).PRETOKENIZE_REGEX
QWEN35 = __import__("transformers.models.qwen3_5.tokenization_qwen3_5", fromlist=["x"]).PRETOKENIZE_REGEX
# Pre-tokenizer names whose Hugging Face tokenizers normalize to NFC first (transformers'
# Qwen2Tokenizer and CohereTokenizer); the GGUF records only the name. Not qwen35: transformers'
# Qwen3_5Tokenizer adds NFC, but the upstream ids in ggml-vocab-qwen35.gguf.out keep decomposed
# marks ("e\u0301" -> 2 tokens), so the released tokenizer.json has none.
NFC_PRES = ("qwen2", "command-r")


def _split(pattern):
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)


def _byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)


def pre_tokenizer_for(name):
    """The tokenizer.json pre_tokenizer a GGUF `tokenizer.ggml.pre` name stands for."""
    if name in ("gpt-2", "default", "mpt"):
        return _byte_level(True)
    if name in ("starcoder", "refact", "command-r"):
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _byte_level(True)])
    if name == "llama-bpe":
        return pre_tokenizers.Sequence([_split(LLAMA3), _byte_level(False)])
    if name in ("qwen2", "qwen35"):
        return pre_tokenizers.Sequence([_split(QWEN2 if name == "qwen2" else QWEN35), _byte_level(False)])
    if name == "deepseek-llm":
        return pre_tokenizers.Sequence([_split("[\r\n]"), _split(DS_LETTERS), _split(DS_PUNCT), _split(r"\s+$"),
                                        _split(CJK), pre_tokenizers.Digits(individual_digits=False),
                                        _byte_level(False)])
    if name == "deepseek-coder":
        return pre_tokenizers.Sequence([_split("[\r\n]"), _split(r"\s?\p{L}+"), _split(r"\s?\p{P}+"), _split(CJK),
                                        pre_tokenizers.Digits(individual_digits=True), _byte_level(False)])
    if name == "falcon":
        return pre_tokenizers.Sequence([pre_tokenizers.Punctuation("contiguous"), _byte_level(True),
                                        pre_tokenizers.Digits(individual_digits=False), _split("[0-9][0-9][0-9]")])
    raise ValueError(f"no oracle pre-tokenizer for {name!r}")


_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _fields(path):
    """The tokenizer.* metadata of a GGUF file (a minimal reader: GGUFReader is slow on vocabularies)."""
    data = pathlib.Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        value = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return value

    def string():
        nonlocal pos
        n = take("<Q")
        pos += n
        return data[pos - n:pos].decode("utf-8", errors="replace")

    def value(vtype):
        if vtype == 8:
            return string()
        if vtype == 9:
            etype, n = take("<I"), take("<Q")
            return [value(etype) for _ in range(n)]
        return take(_SCALAR[vtype])

    assert data[:4] == b"GGUF", path
    pos = 4
    take("<I")
    take("<Q")
    n_kv = take("<Q")
    out = {}
    for _ in range(n_kv):
        key = string()
        out[key] = value(take("<I"))
    return {k: v for k, v in out.items() if k.startswith("tokenizer.")}


def spm_merges(tokens, scores, types):
    """SentencePiece BPE merges from scores, as transformers' GGUF/SentencePiece converters derive
    them: every split of a token into two tokens, ordered by the token's score."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for i, piece in enumerate(tokens):
        if types[i] not in (1, 4):
            continue
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                local.append((left, right, scores[i], i, scores[vocab[left]], scores[vocab[right]]))
        local.sort(key=lambda m: (m[4], m[5]), reverse=True)
        merges.extend(local)
    merges.sort(key=lambda m: (-m[2], m[3]))
    return [(m[0], m[1]) for m in merges]


def oracle_from_gguf(path):
    """(tokenizers.Tokenizer, info dict) equivalent to the tokenizer described by a GGUF file."""
    f = _fields(path)
    model = f["tokenizer.ggml.model"]
    tokens = f["tokenizer.ggml.tokens"]
    types = f.get("tokenizer.ggml.token_type", [1] * len(tokens))
    vocab = {t: i for i, t in enumerate(tokens)}
    info = {"model": model, "pre": f.get("tokenizer.ggml.pre", "default")}
    if model == "gpt2":
        merges = [tuple(m.split(" ", 1)) for m in f["tokenizer.ggml.merges"]]
        tok = Tokenizer(BPE(vocab, merges, ignore_merges=info["pre"] == "llama-bpe"))
        tok.pre_tokenizer = pre_tokenizer_for(info["pre"])
        if info["pre"] in NFC_PRES:
            tok.normalizer = normalizers.NFC()
        tok.decoder = decoders.ByteLevel()
    elif model == "llama":
        scores = f["tokenizer.ggml.scores"]
        unk = f.get("tokenizer.ggml.unknown_token_id")
        prefix = f.get("tokenizer.ggml.add_space_prefix", True)
        tok = Tokenizer(BPE(vocab, spm_merges(tokens, scores, types), byte_fallback=True, fuse_unk=True,
                            unk_token=tokens[unk] if unk is not None else None))
        norms = [normalizers.Prepend("▁")] if prefix else []
        tok.normalizer = normalizers.Sequence(norms + [normalizers.Replace(" ", "▁")])
        decs = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
        if prefix:
            decs.append(decoders.Strip(" ", 1, 0))
        tok.decoder = decoders.Sequence(decs)
    elif model == "gemma4":
        # transformers' GemmaTokenizer (Gemma 3 and 4): BPE with explicit merges on U+2581 text.
        merges = [tuple(m.split(" ", 1)) for m in f["tokenizer.ggml.merges"]]
        unk = f.get("tokenizer.ggml.unknown_token_id")
        tok = Tokenizer(BPE(vocab, merges, fuse_unk=True, byte_fallback=True,
                            unk_token=tokens[unk] if unk is not None else None))
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    else:
        raise ValueError(f"no oracle for tokenizer model {model!r}")
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] in (2, 3)])
    tok.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                    for i in range(len(tokens)) if types[i] == 4])
    return tok, info


def write_hf_folder(tok, folder: pathlib.Path):
    """Saves the oracle as tokenizer.json (what memra's Hugging Face loader reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder
