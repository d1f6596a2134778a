"""Quant codecs gate: memra's dequantizers are bit-identical to gguf.quants.dequantize and its
quantizers byte-identical to gguf.quants.quantize wherever the package implements the type.
The K-quant encoders (absent from the package) are checked by cross-decoding with the package
and by error bounds. Driven through tests/quant/quant_cli on random blocks and edge cases."""
import pathlib
import subprocess
import zlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

DEQUANT_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                 "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]
# Byte offsets of the f16 scale fields inside one block of each type.
SCALE_OFFSETS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
                 "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
                 "IQ4_NL": [0], "IQ4_XS": [0]}
# f16 bit patterns for scales: zeros, largest finite, subnormals, Inf, quiet/signalling NaN.
EDGE_F16 = [0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7C00, 0xFC00,
            0x7E00, 0x7D01, 0xFE00, 0x3C00]
# The package's quantizers, which ours must reproduce byte for byte.
REFERENCE_QUANT_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
K_QUANT_TYPES = ["Q4_K", "Q5_K", "Q6_K"]


@pytest.fixture(scope="module")
def quant_cli(build_dir):
    path = build_dir / "tests" / "quant" / "quant_cli"
    assert path.exists(), f"{path} is missing: build the cpu preset first"
    return path


def run_cli(quant_cli, tmp_path, mode, type_name, data: bytes, check=True):
    src, dst = tmp_path / f"{mode}-{type_name}.in", tmp_path / f"{mode}-{type_name}.out"
    src.write_bytes(data)
    proc = subprocess.run([str(quant_cli), mode, type_name, str(src), str(dst)],
                          capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
        return dst.read_bytes()
    return proc


def ours_dequant(quant_cli, tmp_path, type_name, raw: np.ndarray) -> np.ndarray:
    return np.frombuffer(run_cli(quant_cli, tmp_path, "dequant", type_name, raw.tobytes()), np.float32)


def ours_quant(quant_cli, tmp_path, type_name, values: np.ndarray) -> np.ndarray:
    data = values.astype(np.float32).tobytes()
    return np.frombuffer(run_cli(quant_cli, tmp_path, "quant", type_name, data), np.uint8)


def ref_dequant(type_name, raw: np.ndarray) -> np.ndarray:
    qtype = T[type_name]
    block, size = GGML_QUANT_SIZES[qtype]
    rows = raw.reshape(-1, size * 8) if type_name not in ("F32", "F16", "BF16") else raw
    if type_name == "F32":
        return raw.view(np.float32).ravel()
    if type_name == "F16":
        return quants.dequantize(raw.view(np.float16), qtype).ravel()
    with np.errstate(all="ignore"):
        return quants.dequantize(rows, qtype).ravel().astype(np.float32)


def random_blocks(type_name, n_blocks, rng) -> np.ndarray:
    block, size = GGML_QUANT_SIZES[T[type_name]]
    raw = rng.integers(0, 256, size=n_blocks * size, dtype=np.uint8)
    if type_name in SCALE_OFFSETS:
        blocks = raw.reshape(n_blocks, size)
        # Half the blocks get ordinary scales (random f16 in [2^-10, 2^2)), the rest keep random
        # bits (which include Inf/NaN), then a run of blocks gets each edge pattern.
        tame = rng.integers(0x1400, 0x4400, size=(n_blocks, 2), dtype=np.uint16).view(np.uint8)
        for k, off in enumerate(SCALE_OFFSETS[type_name]):
            blocks[: n_blocks // 2, off:off + 2] = tame[: n_blocks // 2, 2 * k:2 * k + 2]
            for e, pattern in enumerate(EDGE_F16):
                row = n_blocks // 2 + e
                blocks[row, off:off + 2] = np.frombuffer(np.uint16(pattern).tobytes(), np.uint8)
        blocks[-1, :] = 0  # an all-zero block
        blocks[-2, :] = 0xFF  # all bits set
    return raw


@pytest.mark.parametrize("type_name", DEQUANT_TYPES)
def test_dequant_bit_identical(quant_cli, tmp_path, type_name):
    rng = np.random.default_rng(zlib.crc32(type_name.encode()))
    if type_name in ("F32", "F16", "BF16"):
        n = 4096 if type_name == "F32" else 65536
        raw = rng.integers(0, 256, size=n * (4 if type_name == "F32" else 2), dtype=np.uint8)
        if type_name != "F32":  # every 16-bit pattern once
            raw = np.arange(65536, dtype=np.uint16).view(np.uint8)
    else:
        raw = random_blocks(type_name, 128, rng)
    ours = ours_dequant(quant_cli, tmp_path, type_name, raw)
    if type_name == "BF16":
        ref = quants.dequantize(raw.view(np.uint8).reshape(1, -1), T.BF16).ravel()
    else:
        ref = ref_dequant(type_name, raw)
    assert ours.shape == ref.shape
    mismatch = np.flatnonzero(ours.view(np.uint32) != ref.view(np.uint32))
    assert mismatch.size == 0, (
        f"{type_name}: {mismatch.size} values differ, first at {mismatch[0]}: "
        f"ours {ours[mismatch[0]]!r} ref {ref[mismatch[0]]!r}")


def quant_inputs(type_name, rng) -> dict[str, np.ndarray]:
    block = GGML_QUANT_SIZES[T[type_name]][0]
    n = 256 * 16
    cases = {
        "normal": rng.normal(0, 0.02, n),
        "wide": rng.normal(0, 1, n) * np.exp(rng.uniform(-20, 20, n)),
        "uniform": rng.uniform(-3, 3, n),
        "zeros": np.zeros(n),
        "ties": (rng.integers(-64, 64, n) / 4.0),  # many x * id land on exact .5
        "constant": np.full(n, -1.5),
        "positive": rng.uniform(0.5, 1.0, n),
        "subnormal": rng.normal(0, 1, n) * 1e-39,
        "tiny": rng.normal(0, 1, n) * 1e-7,
        "max_magnitude": rng.choice([-65504.0, 65504.0, 3e38, -3e38, 1.0], n),
    }
    cases["one_big"] = rng.normal(0, 0.01, n)
    cases["one_big"][::block] = 1000.0
    return {k: v.astype(np.float32) for k, v in cases.items()}


@pytest.mark.parametrize("type_name", REFERENCE_QUANT_TYPES)
def test_quant_byte_identical(quant_cli, tmp_path, type_name):
    rng = np.random.default_rng(1234)
    for case, values in quant_inputs(type_name, rng).items():
        with np.errstate(all="ignore"):
            ref = quants.quantize(values.reshape(16, -1), T[type_name])
        ref = np.ascontiguousarray(ref).view(np.uint8).ravel()
        ours = ours_quant(quant_cli, tmp_path, type_name, values)
        mismatch = np.flatnonzero(ours != ref)
        assert mismatch.size == 0, f"{type_name} {case}: {mismatch.size} bytes differ, first at {mismatch[0]}"


@pytest.mark.parametrize("type_name", ["F16", "BF16"])
def test_float_targets_convert_nonfinite_like_reference(quant_cli, tmp_path, type_name):
    values = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e10, -1e-30, 0.0, -0.0] * 4, np.float32)
    values = np.concatenate([values, np.frombuffer(np.uint32(0x7F800001).tobytes(), np.float32)])
    ours = ours_quant(quant_cli, tmp_path, type_name, values)
    with np.errstate(all="ignore"):
        ref = np.ascontiguousarray(quants.quantize(values, T[type_name])).view(np.uint8).ravel()
    assert np.array_equal(ours, ref)


@pytest.mark.parametrize("type_name", ["Q4_0", "Q8_0", "Q4_K", "Q6_K"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_block_targets_refuse_nonfinite(quant_cli, tmp_path, type_name, bad):
    values = np.zeros(256, np.float32)
    values[100] = bad
    proc = run_cli(quant_cli, tmp_path, "quant", type_name, values.tobytes(), check=False)
    assert proc.returncode == 2
    assert "element 100" in proc.stderr and ("NaN" in proc.stderr or "infinite" in proc.stderr)


def test_partial_block_refused(quant_cli, tmp_path):
    proc = run_cli(quant_cli, tmp_path, "quant", "Q4_K", np.zeros(300, np.float32).tobytes(), check=False)
    assert proc.returncode == 2 and "300" in proc.stderr


# Relative RMS error bounds of dequant(quant(x)) on Gaussian data, about twice what each measures.
K_BOUNDS = {"Q4_K": 0.08, "Q5_K": 0.04, "Q6_K": 0.02}


@pytest.mark.parametrize("type_name", K_QUANT_TYPES)
def test_kquant_encode_decodes_in_reference(quant_cli, tmp_path, type_name):
    """The package has no K-quant encoder: our blocks must decode identically in the package's
    decoder (the layout is right) and stay within the type's error bound."""
    rng = np.random.default_rng(99)
    for case, values in quant_inputs(type_name, rng).items():
        if case in ("wide", "max_magnitude"):
            continue  # no useful bound: f16 scales saturate
        ours = ours_quant(quant_cli, tmp_path, type_name, values)
        ref_decoded = quants.dequantize(ours.reshape(16, -1), T[type_name]).ravel()
        our_decoded = ours_dequant(quant_cli, tmp_path, type_name, ours)
        assert np.array_equal(ref_decoded.view(np.uint32), our_decoded.view(np.uint32)), case
        x = values.astype(np.float64)
        rms = np.sqrt(np.mean(x * x))
        err = np.sqrt(np.mean((our_decoded - x) ** 2))
        if case == "zeros":
            assert err == 0
        elif case in ("normal", "uniform", "ties", "positive"):
            assert err <= K_BOUNDS[type_name] * rms, f"{type_name} {case}: {err / rms:.4f}"


@pytest.mark.parametrize("type_name", K_QUANT_TYPES)
def test_kquant_matches_llamacpp_reference_golden(quant_cli, tmp_path, type_name):
    """Golden blocks from llama.cpp's quantize_row_q{4,5,6}_K_ref (built standalone with
    -ffp-contract=off, see docs/TESTING.md) on 24 blocks of mixed data: ours must be identical."""
    golden = np.load(pathlib.Path(__file__).parents[1] / "quant" / "data" / "kquant_llamacpp_golden.npz")
    ours = ours_quant(quant_cli, tmp_path, type_name, golden["input"])
    size = GGML_QUANT_SIZES[T[type_name]][1]
    differ = np.flatnonzero((ours.reshape(-1, size) != golden[type_name].reshape(-1, size)).any(axis=1))
    assert differ.size == 0, f"{type_name}: blocks {differ.tolist()} differ from llama.cpp's reference"


@pytest.mark.parametrize("type_name", K_QUANT_TYPES)
def test_kquant_golden_provenance(type_name):
    """What can be checked about the goldens without the harness that made them (not committed,
    not recoverable; docs/TESTING.md): 24 blocks, and they encode `input` (the package's
    dequantizer brings them back within the codec's error). If the `gguf` package ever gains a
    K-quant encoder, the goldens must equal its output instead (then regenerate from it)."""
    golden = np.load(pathlib.Path(__file__).parents[1] / "quant" / "data" / "kquant_llamacpp_golden.npz")
    x = golden["input"].astype(np.float32)
    block_bytes = GGML_QUANT_SIZES[T[type_name]][1]
    assert x.shape == (24 * 256,) and golden[type_name].shape == (24 * block_bytes,)
    qtype = T[type_name]
    try:
        theirs = quants.quantize(x.reshape(24, 256), qtype).reshape(-1)
    except NotImplementedError:  # gguf 0.19: dequantize_blocks only for Q4_K, Q5_K, Q6_K
        theirs = None
    if theirs is not None:
        assert np.array_equal(theirs, golden[type_name])
    back = quants.dequantize(golden[type_name].reshape(24, block_bytes), qtype).reshape(-1)
    blocks_x = x.reshape(24, 256).astype(np.float64)
    blocks_back = back.reshape(24, 256).astype(np.float64)
    # Judged: blocks inside the f16 scales' range. The e^20 "wide" blocks overflow it (inf/NaN),
    # the "tiny" ones (~1e-7) underflow it (all zeros), in any K-quant codec.
    peak = np.abs(blocks_x).max(axis=1)
    judged = np.isfinite(blocks_back).all(axis=1) & (peak < 6e4) & ((peak > 1e-3) | (peak == 0))
    assert judged.sum() >= 18, judged
    rms = np.sqrt(((blocks_x - blocks_back) ** 2).mean(axis=1))
    scale = np.sqrt((blocks_x ** 2).mean(axis=1))
    bound = {"Q4_K": 0.12, "Q5_K": 0.06, "Q6_K": 0.03}[type_name]
    ok = (rms <= bound * scale) | (scale == 0) & (rms == 0)
    assert ok[judged].all(), (rms / np.maximum(scale, 1e-300))[judged].max()
