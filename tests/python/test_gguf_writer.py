"""The GGUF writer's output read by the `gguf` package: every metadata value type (nested arrays
included), tensor types, shapes, offsets and data bytes."""
import subprocess

import gguf
import numpy as np
import pytest

from gguf import GGUFValueType as T


@pytest.fixture(scope="module")
def sample(build_dir, tmp_path_factory):
    tool = build_dir / "tests" / "gguf" / "gguf_corpus_tool"
    assert tool.exists(), f"{tool} missing: build the cpu preset"
    path = tmp_path_factory.mktemp("gguf_writer") / "sample.gguf"
    subprocess.run([tool, "sample", path], check=True, timeout=60)
    return gguf.GGUFReader(path)


# Key -> (types as the gguf package reports them, decoded contents); mirrors sample_writer().
EXPECTED = {
    "general.architecture": ([T.STRING], "llama"),
    "general.name": ([T.STRING], "memra sample \u2713"),
    "test.u8": ([T.UINT8], 255),
    "test.i8": ([T.INT8], -128),
    "test.u16": ([T.UINT16], 65535),
    "test.i16": ([T.INT16], -32768),
    "test.u32": ([T.UINT32], 4000000000),
    "test.i32": ([T.INT32], -2000000000),
    "test.f32": ([T.FLOAT32], float(np.float32(1.5e-3))),
    "test.bool": ([T.BOOL], True),
    "test.u64": ([T.UINT64], 18446744073709551615),
    "test.i64": ([T.INT64], -9000000000000000000),
    "test.f64": ([T.FLOAT64], -2.718281828459045),
    "test.empty_string": ([T.STRING], ""),
    "test.strings": ([T.ARRAY, T.STRING], ["a", "", "\u03bb"]),
    "test.i32s": ([T.ARRAY, T.INT32], [-1, 7]),
    "test.f32s": ([T.ARRAY, T.FLOAT32], [0.25]),
    "test.bools": ([T.ARRAY, T.BOOL], [False, True]),
    "test.empty_array": ([T.ARRAY], []),
    # The gguf package flattens nested arrays.
    "test.nested": ([T.ARRAY, T.ARRAY, T.UINT32], [1, 2, 3]),
}


def test_metadata_readable_by_gguf_package(sample):
    fields = {k: f for k, f in sample.fields.items() if not k.startswith("GGUF.")}
    assert list(fields) == list(EXPECTED)
    assert sample.fields["GGUF.version"].contents() == 3
    for key, (types, value) in EXPECTED.items():
        f = fields[key]
        assert f.types == types, key
        got = f.contents()
        if isinstance(got, list):
            got = [x.item() if hasattr(x, "item") else x for x in got]
        assert got == value, key


def sample_byte(tensor_index, i):
    return (i * 31 + tensor_index * 101 + 7) & 0xFF


def test_tensors_readable_by_gguf_package(sample):
    want = [("token_embd.weight", "F32", [5, 3], 60),
            ("blk.0.attn_norm.weight", "F16", [7], 14),
            ("blk.0.attn_q.weight", "Q8_0", [64, 2, 1], 136),
            ("blk.0.ffn_up.weight", "Q4_K", [256, 1, 2, 1], 288)]
    assert len(sample.tensors) == len(want)
    for k, (t, (name, type_name, shape, n_bytes)) in enumerate(zip(sample.tensors, want)):
        assert t.name == name
        assert t.tensor_type.name == type_name
        assert [int(x) for x in t.shape] == shape
        assert t.n_bytes == n_bytes
        assert t.data_offset % 32 == 0
        raw = np.frombuffer(t.data.tobytes(), dtype=np.uint8)
        assert raw.tolist() == [sample_byte(k, i) for i in range(n_bytes)], name
