"""scripts/check_kernels.py, the lint that keeps programmatic dependent launch exact: every kernel
waits for the kernel before it (detail::wait_for_inputs) before it reads anything, the exceptions
being the decode products' early weight load (tiled_chunk.cuh's EarlyChunk) and decode
attention's early step metadata (attention_decode.cuh's EarlyRun), and no kernel is launched with
a raw <<<>>>. Run here on made-up kernel files."""
import check_kernels as ck

WAIT = "  detail::wait_for_inputs(detail::Trigger::late);\n"


def lint(tmp_path, monkeypatch, capsys, body, launch=""):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text(
        "template <DType D>\n__global__ void __launch_bounds__(256, 3)\n"
        "    k(const MatmulArgs x, const MultiOut outs, int pack, bool early) {\n"
        + body + "  y[0] = 1.0f;\n}\n" + launch)
    monkeypatch.setattr(ck, "ROOT", tmp_path)
    rc = ck.main()
    return rc, capsys.readouterr().err


def test_wait_first_passes(tmp_path, monkeypatch, capsys):
    assert lint(tmp_path, monkeypatch, capsys, "  using T = Tiled<D>;\n" + WAIT)[0] == 0


def test_early_weights_statement_passes(tmp_path, monkeypatch, capsys):
    body = ("  using T = Tiled<D>;\n"
            "  const EarlyChunk<D> first = early_chunk<D>(x, outs, pack, early && !kExperts);\n"
            + WAIT)
    assert lint(tmp_path, monkeypatch, capsys, body)[0] == 0


def test_early_step_metadata_statement_passes(tmp_path, monkeypatch, capsys):
    body = ("  using DC = DecodeConfig<D, CT, kShared>;\n"
            "  const EarlyRun early = early_decode_run<(kTensor && !kRun)>(p, C::kChunkShift);\n"
            + WAIT)
    assert lint(tmp_path, monkeypatch, capsys, body)[0] == 0


def test_a_read_before_the_wait_fails(tmp_path, monkeypatch, capsys):
    body = "  const float v = x.y[0];\n" + WAIT
    rc, err = lint(tmp_path, monkeypatch, capsys, body)
    assert rc == 1
    assert "runs before detail::wait_for_inputs()" in err and "x.y[0]" in err


def test_other_early_statements_fail(tmp_path, monkeypatch, capsys):
    # Only the early chunk's and the early run's own forms: either built some other way, not
    # const, or a second statement beside one, is refused.
    bodies = (
        "  const EarlyChunk<D> first = make_anything(x);\n" + WAIT,
        "  EarlyChunk<D> first = early_chunk<D>(x, outs, pack, early);\n" + WAIT,
        "  const EarlyChunk<D> first = early_chunk<D>(x, outs, pack, early);\n"
        "  const int o = take_output(outs, outs.tile_begin, 0, a);\n" + WAIT,
        "  const EarlyRun early = read_anything(p);\n" + WAIT,
        "  EarlyRun early = early_decode_run<true>(p, 4);\n" + WAIT,
    )
    for i, body in enumerate(bodies):
        sub = tmp_path / f"case{i}"
        sub.mkdir()
        rc, err = lint(sub, monkeypatch, capsys, body)
        assert rc == 1, body


def test_missing_wait_and_raw_launch_fail(tmp_path, monkeypatch, capsys):
    rc, err = lint(tmp_path, monkeypatch, capsys, "", launch="void go() { k<<<1, 32>>>(); }\n")
    assert rc == 1
    assert "never calls detail::wait_for_inputs()" in err
    assert "raw <<<>>> launch" in err
