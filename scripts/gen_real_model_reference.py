#!/usr/bin/env python3
"""Teacher-forced reference for the packaged real model (Gemma 3 270M Q4_K_M GGUF): transformers
loads the same GGUF (dequantized to float32) and records its argmax next token at every position
of a fixed ~200-token text. The model gate (tests/python/test_models_real.py) requires memra's
argmax to agree at >= 99% of positions.

The token ids come from memra's tokenizer (checked against HF `tokenizers` by the tokenizer
gate): transformers 5.17's GGUF tokenizer conversion splits this text into 420 short pieces
where the real Gemma tokenizer gives 197 tokens, and teacher forcing on unnatural pieces would
compare near-ties. Any ids are a valid gate input; natural ones give meaningful predictions.
Run once in the fixture venv (transformers 5.17 + torch + gguf + accelerate):
    python3 -c "import json,runpy; t=runpy.run_path('scripts/gen_real_model_reference.py', run_name='x')['TEXT'];
        print(json.dumps({'texts': [t], 'add_special': True}))" |
      build/cpu/tools/memra tokenize -m MODEL --batch - |
      python3 -c "import json,sys; print(json.load(sys.stdin)['results'][0]['ids'])" > /tmp/ids.json
    .venv-fixtures/bin/python scripts/gen_real_model_reference.py --tokens-file /tmp/ids.json \
        [--model ~/.cache/memra/models/gemma-3-270m-q4_k_m.gguf]
Writes tests/fixtures/models/gemma3-270m/teacher_forced.json: tokens (BOS + the text), argmax
(per position, the prediction for the next token), top2_gap (best minus second-best logit per
position, to explain any disagreement), and the tool versions.
"""
import argparse
import json
import pathlib

TEXT = (
    "The water cycle describes how water moves between the oceans, the air and the land. "
    "Heat from the sun evaporates water from the surface of seas and lakes, and plants release "
    "water vapour through their leaves. As the warm, moist air rises it cools, and the vapour "
    "condenses into tiny droplets that form clouds. When the droplets grow heavy enough they "
    "fall as rain, snow or hail. Some of this water soaks into the ground and refills aquifers, "
    "some flows over the surface into rivers, and rivers carry it back to the sea. The whole "
    "journey can take days or thousands of years, depending on where the water is stored. "
    "Scientists study the cycle to predict droughts and floods, to manage drinking water for "
    "growing cities, and to understand how a warming climate changes the amount of rain that "
    "falls in each region. In many places, farmers depend on a steady rainy season to grow rice, "
    "wheat and maize, so even small shifts in the timing of the rains matter a great deal."
)


def main():
    import torch  # imported here so TEXT can be read without the fixture venv
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = pathlib.Path(__file__).resolve().parents[1]
    model_path = pathlib.Path.home() / ".cache/memra/models/gemma-3-270m-q4_k_m.gguf"
    parser.add_argument("--model", type=pathlib.Path, default=model_path)
    parser.add_argument("--tokens-file", type=pathlib.Path, required=True,
                        help="JSON list of token ids of TEXT (BOS first), from `memra tokenize`")
    parser.add_argument("--out", type=pathlib.Path,
                        default=root / "tests/fixtures/models/gemma3-270m/teacher_forced.json")
    args = parser.parse_args()
    folder, name = str(args.model.parent), args.model.name
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                              dtype=torch.float32).eval()
    ids = json.loads(args.tokens_file.read_text())
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    top2 = torch.topk(logits, 2, dim=-1).values
    out = {"model": name, "transformers": transformers.__version__, "torch": torch.__version__,
           "text": TEXT, "tokens": ids, "argmax": logits.argmax(-1).tolist(),
           "top2_gap": [round(float(g), 4) for g in (top2[:, 0] - top2[:, 1])]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out) + "\n")
    print(f"{len(ids)} tokens; first predicted ids: {out['argmax'][:12]}")


if __name__ == "__main__":
    main()
