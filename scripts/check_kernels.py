#!/usr/bin/env python3
"""Fails when a CUDA kernel could race under programmatic dependent launch (kernels/launch.cuh).

Every kernel in kernels/ is launched through detail::launch, which on Hopper lets it start before
the kernel before it has finished; only griddepcontrol.wait (detail::wait_for_inputs) makes that
kernel's writes visible. A kernel that forgets the wait reads stale inputs now and then, a silent
race no single-kernel check sees. So: no raw <<<...>>> launch in kernels/, and the first
statement of every __global__ body is detail::wait_for_inputs(), after at most type aliases, the
decode products' early weight load (tiled_chunk.cuh's EarlyChunk: it reads only kernel parameters
and weights, which no kernel of a step writes) and decode attention's early step metadata
(attention_decode.cuh's EarlyRun: positions, token_seq and block tables, which the host uploads
before a step's first kernel and no kernel writes), with, where MEMRA_DECODE_EARLY_BARRIERS asks,
its copies' barriers set from them (early_decode_barriers: the block's own shared memory only).
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED_BEFORE_WAIT = re.compile(
    r"^(using \w+ = [^;]+;|const EarlyChunk<D> first = early_\w+<[^;]*>\([^;]*\);"
    r"|const EarlyRun early = early_decode_run<[^;]*>\([^;]*\);"
    r"|const bool early_barriers = early_decode_barriers<[^;]*>\([^;]*\);|)$")


def body_start(text, at):
    """Index just past the '{' opening the function body of the __global__ at `at`."""
    depth = 0
    for i in range(at, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "{" and depth == 0:
            return i + 1
    raise ValueError("no body")


def statements_before_wait(body):
    """The statements before the wait (None when there is no wait)."""
    idx = body.find("detail::wait_for_inputs(")
    if idx < 0:
        return None
    return [" ".join(s.split()) + ";" for s in body[:idx].split(";") if s.strip()]


def main():
    errors = []
    for path in sorted((ROOT / "kernels").rglob("*.cu*")):
        text = re.sub(r"//[^\n]*", "", path.read_text())  # comments keep their line breaks
        rel = path.relative_to(ROOT)
        for m in re.finditer(r"<<<", text):
            line = text.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}:{line}: raw <<<>>> launch (use detail::launch)")
        for m in re.finditer(r"__global__", text):
            line = text.count("\n", 0, m.start()) + 1
            start = body_start(text, m.start())
            before = statements_before_wait(text[start:start + 2000])
            if before is None:
                errors.append(f"{rel}:{line}: kernel never calls detail::wait_for_inputs()")
                continue
            for s in before:
                if not ALLOWED_BEFORE_WAIT.match(s):
                    errors.append(f"{rel}:{line}: '{s}' runs before detail::wait_for_inputs()")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print("check_kernels: every kernel must wait for its inputs first (kernels/launch.cuh)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
