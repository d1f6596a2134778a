"""Chat template gate: memra's Jinja renderer vs transformers' apply_chat_template render path
(render_jinja_template: the same compiled ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, loopcontrols, tojson, raise_exception, strftime_now) on every template in the
pinned test data's chat-templates/ (scripts/fetch_test_data.py), over the conversations in
chat_template_cases.py. Byte-identical text is required; where the oracle raises, memra must
raise too, with the same raise_exception message or the same kind of error (template_errors.py).
One memra process renders all."""
import json
import subprocess
import sys

import pytest

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from chat_template_cases import TOOLS, cases  # noqa: E402
import required  # noqa: E402
from template_errors import error_mismatch  # noqa: E402

transformers_utils = required.import_module("transformers.utils.chat_template_utils")

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}

# Tool-use templates that only render with the inputs their model's callers always pass: a tools
# list on every request, Cohere's flat tool schema, firefunction's `functions`/`datetime` strings.
FLAT_TOOLS = [t["function"] for t in TOOLS]
TEMPLATE_INPUTS = {
    "CohereForAI-c4ai-command-r-plus-tool_use": {"tools": FLAT_TOOLS},
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": {"tools": TOOLS},
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": {"tools": TOOLS},
    "fireworks-ai-llama-3-firefunction-v2": {
        "extra": {"functions": json.dumps(FLAT_TOOLS), "datetime": "2024-07-01"}},
}


def oracle_render(source, messages, tools, add_generation_prompt, extra):
    kwargs = {**SPECIAL_TOKENS, **extra}
    rendered, _ = transformers_utils.render_jinja_template(
        conversations=[messages], tools=tools, documents=None, chat_template=source,
        add_generation_prompt=add_generation_prompt, **kwargs)
    return rendered[0]


def memra_context(messages, tools, add_generation_prompt, extra):
    # The exact variables render_jinja_template passes (tools/documents present even when None).
    return {"messages": messages, "tools": tools, "documents": None,
            "add_generation_prompt": add_generation_prompt, **SPECIAL_TOKENS, **extra}


# One test (not several sharing a fixture) so pytest-xdist never runs the oracle twice.
@pytest.fixture(scope="module")
def template_results(memra_bin, test_data, tmp_path_factory):
    template_dir = test_data / "chat-templates"
    paths = sorted(template_dir.glob("*.jinja"))
    # The corpus sizes (docs/TESTING.md): 70 templates x 84 cases.
    assert len(paths) >= 70, f"{len(paths)} templates in {template_dir}, expected 70"
    all_cases = cases()
    assert len(all_cases) == 84
    batch = {"templates": {p.stem: str(p) for p in paths}, "cases": []}
    expected = []
    for p in paths:
        source = p.read_text(encoding="utf-8")
        inputs = TEMPLATE_INPUTS.get(p.stem, {})
        for case_id, messages, tools, agp, extra in all_cases:
            tools = inputs.get("tools", tools)
            extra = {**extra, **inputs.get("extra", {})}
            try:
                want = ("text", oracle_render(source, messages, tools, agp, extra))
            except Exception as e:  # the oracle's own failures are compared as "error"
                want = ("error", f"{type(e).__name__}: {e}")
            expected.append((p.stem, case_id, want))
            batch["cases"].append({"template": p.stem,
                                   "context": memra_context(messages, tools, agp, extra)})
    work = tmp_path_factory.mktemp("chat_template")
    (work / "batch.json").write_text(json.dumps(batch, ensure_ascii=False), encoding="utf-8")
    proc = subprocess.run([str(memra_bin), "template", "--batch", str(work / "batch.json"),
                           "--out", str(work / "out.json")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((work / "out.json").read_text(encoding="utf-8"))
    assert len(got) == len(expected)
    return expected, got


def test_chat_templates_match_transformers(template_results):
    expected, got = template_results
    mismatches, oracle_errors = [], {}
    for (name, case_id, want), result in zip(expected, got):
        if want[0] == "error":
            oracle_errors.setdefault(name, []).append(f"{case_id} ({want[1][:80]})")
            if "error" not in result:
                mismatches.append(f"{name} {case_id}: oracle raised {want[1][:120]!r}, memra rendered")
            elif why := error_mismatch(want[1], result["error"]):
                mismatches.append(f"{name} {case_id}: {why}")
            continue
        if "error" in result:
            mismatches.append(f"{name} {case_id}: memra raised {result['error'][:200]!r}")
        elif result["text"] != want[1]:
            a, b = result["text"], want[1]
            i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
            mismatches.append(f"{name} {case_id}: differs at char {i}: memra {a[i:i+60]!r} "
                              f"vs oracle {b[i:i+60]!r}")
    # Listed, never silently skipped: the (template, case) pairs transformers itself cannot render.
    print(f"\n{len(expected)} renders; oracle raised on {sum(map(len, oracle_errors.values()))}:")
    for name, items in sorted(oracle_errors.items()):
        print(f"  {name}: {len(items)} cases, e.g. {items[0]}")
    per_template = {}
    for name, _, want in expected:
        per_template[name] = per_template.get(name, 0) + (want[0] == "text")
    thin = {n: k for n, k in per_template.items() if k < 30}
    # A template transformers cannot render (often enough) is listed here, never skipped.
    assert not thin, f"templates with fewer than 30 conversations the oracle renders: {thin}"
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:40])
