#!/usr/bin/env python3
"""Generates the model-gate fixtures: tiny random-weight Hugging Face checkpoints of llama (with
llama3 rope scaling), qwen2, qwen3, gemma3 (sliding + full layers, window shorter than the
prompt), gemma4 (dense text model: per-layer head dims, proportional partial rotary, per-layer
input embeddings, k = v, KV sharing, double-wide MLP, layer scalars), qwen3_moe (two fixtures:
qwen3_moe renormalizes the top-k router weights and has a dense layer from mlp_only_layers;
qwen3_moe_sparse_step does not renormalize and makes every second layer sparse by
decoder_sparse_step), qwen3_5 (the hybrid stack: gated delta-net linear attention layers around
a gated full-attention layer with partial rotary, more value heads than key heads so the head
order matters), qwen3_5_moe (the same stack, every MLP a routed mixture of experts plus a
sigmoid-gated shared expert), gemma4_moe (Gemma 4's mixture-of-experts block, as the 26B-A4B
model: routed GeGLU experts beside every layer's dense MLP, k = v on full layers, no per-layer
input embeddings, no KV sharing), and transformers' float32 reference for them.

It also writes the multimodal wrapper fixtures gemma3_mm (Gemma3ForConditionalGeneration) and
qwen3_5_mm (Qwen3_5ForConditionalGeneration): the gemma3 / qwen3_5 fixture's text weights, read
back from its folder, inside the wrapper with a tiny random vision tower (a few KB), saved in the
layout transformers writes (gemma3: language_model.model.*, vision_tower.*,
multi_modal_projector.*; qwen3_5: model.language_model.*, model.visual.*). They have no
reference.json of their own: wrapper.json names the text fixture whose reference applies, and
the largest difference measured between transformers' float32 run of the wrapper's text path
and that reference (the generator refuses to write a fixture where it exceeds 1e-5; for
gemma3_mm after capping the wrapper's logits as Gemma3ForCausalLM does: generate_wrapper says why).

Run in the fixture venv (transformers 5.17 + torch; not the project venv):
    .venv-fixtures/bin/python scripts/gen_model_fixtures.py [--out tests/fixtures/models]
(the wrapper fixtures read their text fixture's folder, so generate those first or together)

Per fixture, tests/fixtures/models/<fixture>/ holds config.json, generation_config.json,
tokenizer.json (BPE, 128 tokens), model.safetensors (weights rounded to bf16 and stored as bf16, to keep the fixture small; the
reference is computed in float32 from exactly those values), and reference.json:
  prompt   the prompt token ids (48)
  greedy   32 greedy tokens after the prompt
  logits   float32 logits [48 + 32, vocab] of one full forward over prompt + greedy (row i is the
           next-token distribution after token i), as a flat list
  min_top2_gap  the smallest gap between the best and second-best logit over all greedy steps,
           so a tie cannot make the greedy comparison flaky
"""
import argparse
import json
import pathlib

import tokenizers
import torch
import transformers

VOCAB = 128
PROMPT_LEN = 48
N_GREEDY = 32
MATRIX_STD = 0.3  # large enough for clear top-2 gaps (0.15 gave gaps of 6e-4)
# gemma4's attention is unscaled (q and k are RMS-normed, scaling 1): at 0.3 its greedy run
# repeats one token 32 times (no teeth); 0.1 gives varied tokens with a 0.0155 top-2 gap.
# gemma4_moe (the routed branch added to every layer) repeated tokens at 0.1 too; 0.07 gives 20
# distinct greedy tokens with a 0.0092 top-2 gap.
MATRIX_STD_OF = {"gemma4": 0.1, "gemma4_moe": 0.07}
# Gemma 4's router input is rms_norm(x) * scale / sqrt(hidden), elements ~0.1: at the matrix std
# its logits would spread by ~0.07 and the softmax be nearly flat; at 2.0 they spread by ~2, so
# each token prefers some experts clearly (routing with teeth, no near-ties).
ROUTER_STD = 2.0
COMMON = dict(vocab_size=VOCAB, hidden_size=96, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=3, num_key_value_heads=1, head_dim=32,
              max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
              pad_token_id=0)


# Fixture name -> seed (each fixture's seed is fixed, so adding one leaves the others' bytes).
FIXTURES = {"llama": 1234, "qwen2": 1235, "qwen3": 1236, "gemma3": 1237, "qwen3_moe": 1238,
            "qwen3_moe_sparse_step": 1239, "qwen3_5": 1240, "qwen3_5_moe": 1241, "gemma4": 1241,
            "gemma4_moe": 1242}
# (gemma4 and qwen3_5_moe were added on separate branches with the same seed; both keep it, so
# neither fixture's bytes change.)
# Wrapper fixture -> (its text fixture, the vision tower's seed).
WRAPPERS = {"gemma3_mm": ("gemma3", 1250), "qwen3_5_mm": ("qwen3_5", 1251)}
# A largest-possible difference from the text reference: the wrapper runs the same text model.
WRAPPER_TOL = 1e-5


def write_tokenizer(out_dir):
    """A sentencepiece-style BPE tokenizer.json of exactly VOCAB tokens (3 specials, the
    metaspace and printable characters, no merges): `memra convert` needs one; the gates feed
    token ids directly."""
    symbols = ["\u2581"] + [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xC0, 0x100)]
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    vocab.update({sym: i + 3 for i, sym in enumerate(symbols[:VOCAB - 3])})
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(split=False)
    tok.decoder = tokenizers.decoders.Metaspace()
    tok.add_special_tokens(["<pad>", "<s>", "</s>"])
    tok.save(str(out_dir / "tokenizer.json"))


def make_config(arch):
    if arch == "llama":
        rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64}
        return transformers.LlamaConfig(**COMMON, rope_parameters=rope, tie_word_embeddings=False)
    if arch == "qwen2":
        return transformers.Qwen2Config(**COMMON, rope_parameters={"rope_type": "default",
                                                                   "rope_theta": 100000.0},
                                        tie_word_embeddings=True)
    if arch == "qwen3":
        return transformers.Qwen3Config(**COMMON, rope_parameters={"rope_type": "default",
                                                                   "rope_theta": 1000000.0},
                                        tie_word_embeddings=False)
    if arch == "gemma3":
        rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}
        return transformers.Gemma3TextConfig(
            **COMMON, rope_parameters=rope, layer_types=["sliding_attention", "full_attention"],
            sliding_window=8, query_pre_attn_scalar=24, final_logit_softcapping=10.0,
            hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True)
    if arch == "qwen3_moe":
        return transformers.Qwen3MoeConfig(
            **{**COMMON, "num_hidden_layers": 3}, rope_parameters={"rope_type": "default",
                                                                  "rope_theta": 1000000.0},
            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True,
            mlp_only_layers=[1], decoder_sparse_step=1, tie_word_embeddings=False)
    if arch == "qwen3_moe_sparse_step":
        return transformers.Qwen3MoeConfig(
            **COMMON, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            num_experts=6, num_experts_per_tok=3, moe_intermediate_size=16, norm_topk_prob=False,
            mlp_only_layers=[], decoder_sparse_step=2, tie_word_embeddings=True)
    if arch in ("gemma4", "gemma4_moe"):
        # Both: sliding + full layers with their own head dims (global_head_dim), proportional
        # partial rotary on full layers, k = v on full layers (one global kv head).
        # gemma4 (dense text): per-layer input embeddings, the last two layers sharing the KV of
        # the first two with a double-wide MLP, and a layer_scalar per layer (randomized below).
        # gemma4_moe (the 26B-A4B layout in small): no per-layer inputs, no KV sharing, and in
        # every layer 8 GeGLU experts of width 16 (top 2) beside the dense MLP of width 64.
        rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                   "rope_theta": 1000000.0}}
        if arch == "gemma4":
            variant = dict(hidden_size_per_layer_input=8, vocab_size_per_layer_input=VOCAB,
                           num_kv_shared_layers=2, use_double_wide_mlp=True,
                           enable_moe_block=False)
        else:
            variant = dict(hidden_size_per_layer_input=0, num_kv_shared_layers=0,
                           use_double_wide_mlp=False, enable_moe_block=True, num_experts=8,
                           top_k_experts=2, moe_intermediate_size=16)
        return transformers.Gemma4TextConfig(
            **{**COMMON, "num_hidden_layers": 4, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 16},
            rope_parameters=rope, global_head_dim=32, num_global_key_value_heads=1,
            layer_types=["sliding_attention", "full_attention"] * 2, sliding_window=8,
            final_logit_softcapping=10.0, hidden_activation="gelu_pytorch_tanh",
            attention_k_eq_v=True, tie_word_embeddings=True, **variant)
    if arch == "qwen3_5":
        # Layers: linear, linear, full, linear (full_attention_interval 3); 4 value heads over
        # 2 key heads of different widths; rotary on 8 of the 32 dims of each attention head.
        return transformers.Qwen3_5TextConfig(
            **{**COMMON, "num_hidden_layers": 4},
            rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                             "partial_rotary_factor": 0.25},
            layer_types=["linear_attention", "linear_attention", "full_attention",
                         "linear_attention"],
            linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=24,
            linear_num_key_heads=2, linear_num_value_heads=4, tie_word_embeddings=False)
    if arch == "qwen3_5_moe":
        # qwen3_5's hybrid stack with every MLP a mixture of 8 experts (top 2, renormalized)
        # plus a sigmoid-gated shared expert; full attention at layers 1 and 3 (interval 2).
        return transformers.Qwen3_5MoeTextConfig(
            **{**COMMON, "num_hidden_layers": 4},
            rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                             "partial_rotary_factor": 0.25},
            layer_types=["linear_attention", "full_attention"] * 2,
            linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=24,
            linear_num_key_heads=2, linear_num_value_heads=4, num_experts=8,
            num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24,
            tie_word_embeddings=False)
    raise ValueError(arch)


def randomize(model, gen, std=MATRIX_STD):
    """Every parameter random (norm weights and biases too), rounded to bf16 values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                # Gemma 3's and Qwen3.5's RMSNorms scale by (1 + w); Qwen3.5's gated norm and
                # Gemma 4's RMSNorms by w, as llama's.
                centered = isinstance(model, (transformers.Gemma3ForCausalLM,
                                              transformers.Qwen3_5ForCausalLM,
                                              transformers.Qwen3_5MoeForCausalLM))
                base = 0.0 if centered and "linear_attn.norm" not in name else 1.0
                p.copy_(base + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("router.scale"):  # gemma4: scales the router input, as a norm's w
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("router.per_expert_scale"):  # gemma4: positive routing weights
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif name.endswith("router.proj.weight"):
                p.copy_(ROUTER_STD * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(std * torch.randn(p.shape, generator=gen))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):  # gemma4: a per-layer output scale, saved
                b.copy_((0.5 + torch.rand(b.shape, generator=gen)).to(torch.bfloat16))


def greedy(model, prompt):
    ids = list(prompt)
    gaps = []
    with torch.no_grad():
        for _ in range(N_GREEDY):
            logits = model(torch.tensor([ids])).logits[0, -1]
            top2 = torch.topk(logits, 2).values
            gaps.append(float(top2[0] - top2[1]))
            ids.append(int(torch.argmax(logits)))
        full = model(torch.tensor([ids])).logits[0]
    return ids[len(prompt):], full, min(gaps)


def generate(arch, out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    config = make_config(arch)
    direct = {"gemma3": transformers.Gemma3ForCausalLM, "gemma4": transformers.Gemma4ForCausalLM,
              "gemma4_moe": transformers.Gemma4ForCausalLM}
    model = (direct[arch](config) if arch in direct
             else transformers.AutoModelForCausalLM.from_config(config))
    model = model.to(torch.float32).eval()
    model.config._attn_implementation = "eager"
    randomize(model, gen, MATRIX_STD_OF.get(arch, MATRIX_STD))
    prompt = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=gen).tolist()
    tokens, logits, gap = greedy(model, prompt)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
    write_tokenizer(out_dir)
    ref = {"arch": arch, "transformers": transformers.__version__, "torch": torch.__version__,
           "seed": seed, "prompt": prompt, "greedy": tokens, "min_top2_gap": gap,
           "vocab": VOCAB, "logits": [round(float(v), 6) for v in logits.flatten()]}
    (out_dir / "reference.json").write_text(json.dumps(ref, separators=(",", ":")) + "\n")
    print(f"{arch}: greedy {tokens[:8]}... min top-2 gap {gap:.4f}")


def make_wrapper(text_arch, text_config):
    """The multimodal wrapper config around text_config, with a vision tower of a few KB. Image
    token ids stay transformers' defaults (past the 128-token vocab): the fixture has no image."""
    tied = text_config.tie_word_embeddings
    if text_arch == "gemma3":
        vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, image_size=8, patch_size=4)
        return (transformers.Gemma3Config(text_config=text_config.to_dict(), vision_config=vision,
                                          mm_tokens_per_image=4, tie_word_embeddings=tied),
                transformers.Gemma3ForConditionalGeneration)
    if text_arch == "qwen3_5":
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4,
                      spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                      out_hidden_size=text_config.hidden_size)
        return (transformers.Qwen3_5Config(text_config=text_config.to_dict(), vision_config=vision,
                                           tie_word_embeddings=tied),
                transformers.Qwen3_5ForConditionalGeneration)
    raise ValueError(text_arch)


def generate_wrapper(name, out_root, seed):
    text_arch, _ = WRAPPERS[name]
    text_dir = out_root / text_arch
    text = transformers.AutoModelForCausalLM.from_pretrained(text_dir, dtype=torch.float32)
    config, cls = make_wrapper(text_arch, text.config)
    model = cls(config).to(torch.float32).eval()
    # The text fixture's weights (bf16 values) under the wrapper's names; the rest is the tower.
    text_state = {("lm_head." + k[len("lm_head."):]) if k.startswith("lm_head.")
                  else "model.language_model." + k[len("model."):]: v
                  for k, v in text.state_dict().items()}
    missing, unexpected = model.load_state_dict(text_state, strict=False)
    assert not unexpected, unexpected
    tower = [k for k in missing if not k.startswith("model.language_model.")]
    assert set(missing) == set(tower), missing
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        params = dict(model.named_parameters())
        for key in sorted(tower):
            if key in params:
                p = params[key]
                p.copy_((0.02 * torch.randn(p.shape, generator=gen)).to(torch.bfloat16))
    model.config._attn_implementation = "eager"
    ref = json.loads((text_dir / "reference.json").read_text())
    ids = ref["prompt"] + ref["greedy"][:-1]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    # transformers 5.17's Gemma3ForConditionalGeneration.forward leaves out the text config's
    # final_logit_softcapping, which Gemma3ForCausalLM applies (released Gemma 3 checkpoints set
    # it null, so both agree there). memra reads the text model as the text class (as llama.cpp's
    # converter, one class for both): the check caps here as Gemma3ForCausalLM would.
    cap = getattr(config.get_text_config(), "final_logit_softcapping", None)
    capped_here = text_arch == "gemma3" and cap is not None
    if capped_here:
        logits = cap * torch.tanh(logits / cap)
    want = torch.tensor(ref["logits"], dtype=torch.float32).reshape(-1, ref["vocab"])
    diff = float((logits - want[:len(ids)]).abs().max())
    assert diff <= WRAPPER_TOL, f"{name}: the wrapper's text path differs by {diff}"
    out_dir = out_root / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
    write_tokenizer(out_dir)
    info = {"text_fixture": text_arch, "architecture": cls.__name__,
            "transformers": transformers.__version__, "torch": torch.__version__, "seed": seed,
            "tower_tensors": len(tower), "max_abs_logit_diff_vs_text_reference": diff,
            "final_logit_softcapping_applied_by_the_check": capped_here}
    (out_dir / "wrapper.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"{name}: {cls.__name__}, {len(tower)} tower tensors, text logits within {diff:.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = pathlib.Path(__file__).resolve().parents[1]
    parser.add_argument("--out", type=pathlib.Path, default=root / "tests/fixtures/models")
    parser.add_argument("--arch", nargs="*", default=list(FIXTURES) + list(WRAPPERS))
    args = parser.parse_args()
    for arch in args.arch:
        if arch in WRAPPERS:
            generate_wrapper(arch, args.out, WRAPPERS[arch][1])
        else:
            generate(arch, args.out / arch, seed=FIXTURES[arch])


if __name__ == "__main__":
    main()
