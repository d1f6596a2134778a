"""The GPU model gate's judgement of MoE routing differences (scripts/gpu_model_gate.py): a
(token, layer) whose expert set differs between the CPU and CUDA runs passes only as a near-tie,
the CPU's margin for its own choice at most twice the row's largest router-logit difference.
(The gate itself needs a GPU; this is its arithmetic on made-up routes.)"""
import gpu_model_gate as gate


def call(logits, ids, layer=0):
    n = len(ids) // 2
    return {"layer": layer, "n": n, "logits": logits, "ids": ids, "weights": [0.5] * len(ids)}


# Two tokens, four experts, two a token.
CPU = [call([3.0, 2.0, 1.00, 0.0,
             0.0, 1.0, 2.00, 3.0], [0, 1, 2, 3])]


def test_same_routing_has_no_flips():
    assert gate.route_flips(CPU, CPU) == (0, 2, 0, 0.0)


def test_a_flip_within_the_logit_error_is_a_near_tie():
    # Token 0: experts 1 and 2 are 0.01 apart on the CPU and swapped on CUDA (each logit moved by
    # 0.01), so CUDA picks 2: the CPU's margin 0.01 is within 2 x 0.01.
    cpu = [call([3.0, 1.01, 1.00, 0.0, 0.0, 1.0, 2.0, 3.0], [0, 1, 2, 3])]
    cuda = [call([3.0, 1.00, 1.01, 0.0, 0.0, 1.0, 2.0, 3.0], [0, 2, 2, 3])]
    flips, total, unexplained, worst = gate.route_flips(cpu, cuda)
    assert (flips, total, unexplained) == (1, 2, 0)
    assert worst <= 1.0


def test_a_flip_far_beyond_the_logit_error_is_not():
    # The logits agree to 1e-3 but CUDA chose expert 3 (the CPU's margin 3.0 - 0.0): a routing
    # defect, not rounding.
    cuda = [call([3.0, 2.0, 1.001, 0.0, 0.0, 1.0, 2.0, 3.0], [0, 3, 2, 3])]
    flips, total, unexplained, worst = gate.route_flips(CPU, cuda)
    assert (flips, total, unexplained) == (1, 2, 1)
    assert worst > 100


def test_decode_steps_are_not_compared():
    # Single-token calls (greedy decode) follow each run's own tokens: skipped.
    one = [{"layer": 0, "n": 1, "logits": [1.0, 0.0], "ids": [0], "weights": [1.0]}]
    other = [{"layer": 0, "n": 1, "logits": [0.0, 1.0], "ids": [1], "weights": [1.0]}]
    assert gate.route_flips(one, other) == (0, 0, 0, 0.0)
