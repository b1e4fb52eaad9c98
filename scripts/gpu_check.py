"""`make gpu-check`: everything that needs a CUDA device, in one command, into one Markdown file.

It runs, on this machine's GPU: every `gpu`-marked test; the `quick` suite into a database of its
own, then `compare --reference` on it (each figure beside its published counterpart, with the ratio
and a verdict); the micro scenario's matmul (also at MAMF's H100 shape), triad and copies; Llama 3.2
1B trained with FSDP on one GPU, with and without torch.compile (tokens/s, both MFUs, memory per
rank), and compiled in fp8 where the GPU has float8 tensor cores; LeNet-5 and the autoencoder under
torch, JAX and TensorFlow (each where its CUDA build sees the GPU), and each of those engines' cells
against a bare loop of its own (benchmarks/jax_bare.py, tf_bare.py); benchmarks/overhead.py
(accelbench's loop against a bare one), benchmarks/generate.py (the generate scenario against a bare
`model.generate` loop), benchmarks/cells.py (what a cell costs, forked by the cell server and in a
fresh interpreter: the quick suite's cells are forked too) and benchmarks/peers.py (against a
torch.utils.benchmark loop, ResNet-50 at DeepLearningExamples' AMP configuration). It writes
gpu-check.md (or --out): the device and driver, then each step's command, exit code and output. A
step that fails is reported and the others still run; the exit code is the first non-zero one.

    python scripts/gpu_check.py --out gpu-check.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS_S = 540
"""Time limit of each step: the whole check must finish within 10 minutes on one H100."""


def steps(
    db: Path, float8: bool = False, frameworks: tuple[str, ...] = ("torch",)
) -> list[tuple[str, list[str]]]:
    """The check's steps; `float8`: the GPU has float8 tensor cores (compute capability 8.9+);
    `frameworks`: torch, and those of JAX and TensorFlow that see the GPU (their CUDA builds
    installed)."""
    python, accelbench = sys.executable, [sys.executable, "-m", "accelbench"]
    decoders = tuple(f for f in frameworks if f != "tensorflow")  # TensorFlow's has none
    bare = ["--device", "cuda", "--workload", "autoencoder", "--batch-size", "256"]
    bare += ["--steps", "50", "--rounds", "2"]
    peer = [
        "--workload",
        "resnet50",
        "--batch-size",
        "256",
        "--precision",
        "amp-fp16",
        "--rounds",
        "4",
    ]
    # The one-GPU baseline of torchtitan's FSDP runs (its figures are for 8B on 8 GPUs).
    llm = ["--fsdp", "--precision", "amp-bf16", "--optimizer", "adamw", "--batch-size", "4"]
    llm += ["--epochs", "3", "--steps-per-epoch", "15", "--window-steps", "3", "--device", "cuda"]
    fp8 = ["fp8" if arg == "amp-bf16" else arg for arg in llm]
    micro = ["--scenario", "micro", "--precision", "bf16", "--device", "cuda"]
    mamf = [arg for side in ("m=2048", "n=2048", "k=13312") for arg in ("--model-arg", side)]
    return [
        ("gpu-marked tests", [python, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider"]),
        (
            "quick suite",
            [*accelbench, "run", "--suite", "quick", "--device", "cuda", "--db", str(db)],
        ),
        (
            "the device by itself: matmul TFLOP/s, memory triad and host-device copy GB/s",
            [*accelbench, "run", "micro/matmul,micro/triad,micro/copy", *micro, "--db", str(db)],
        ),
        (
            "a BF16 matmul at H100 SXM's MAMF shape (Bekman's Open Book: 794.5 TFLOP/s)",
            [*accelbench, "run", "micro/matmul", *micro, *mamf, "--db", str(db)],
        ),
        ("against published figures", [*accelbench, "compare", "--reference", "--db", str(db)]),
        (
            "LLM training: Llama 3.2 1B, FSDP on one GPU, amp-bf16 (tokens/s, both MFUs)",
            [*accelbench, "run", "llama3_2_1b", *llm, "--db", str(db)],
        ),
        (
            "LLM training: the same with torch.compile per block",
            [*accelbench, "run", "llama3_2_1b", *llm, "--compile", "--db", str(db)],
        ),
        *(
            [
                (
                    "LLM training: the same compiled, fp8 (torchao float8; TFLOP/s per device)",
                    [*accelbench, "run", "llama3_2_1b", *fp8, "--compile", "--db", str(db)],
                )
            ]
            if float8
            else []
        ),
        (
            f"the same model under {' and '.join(frameworks)}: LeNet-5 and the autoencoder, "
            "bs=256, amp-bf16",
            [
                *(*accelbench, "run", "lenet5,autoencoder", "--framework", ",".join(frameworks)),
                *("--batch-size", "256", "--precision", "amp-bf16", "--device", "cuda"),
                *("--db", str(db)),
            ],
        ),
        (
            f"Llama 3.2 1B's generation under {' and '.join(decoders)}: bf16, batch 1 and 16",
            [
                *(*accelbench, "run", "llama3_2_1b", "--scenario", "generate"),
                *("--framework", ",".join(decoders), "--batch-size", "1,16", "--precision", "bf16"),
                *("--steps-per-epoch", "5", "--device", "cuda", "--db", str(db)),
            ],
        ),
        *(
            (
                f"{name}'s cell against a bare loop of its own: the autoencoder, bs=256, fp32",
                [python, f"benchmarks/{script}", *bare],
            )
            for name, script in (("JAX", "jax_bare.py"), ("TensorFlow", "tf_bare.py"))
            if name.lower() in frameworks
        ),
        (
            "which ceiling binds the LLM runs: the bf16 matmul, the triad's memory floor",
            [*accelbench, "roofline", "--db", str(db)],
        ),
        ("harness overhead", [python, "benchmarks/overhead.py", "--device", "cuda"]),
        (
            "generation against a bare generate loop",
            [python, "benchmarks/generate.py", "--device", "cuda"],
        ),
        (
            "cells forked by the cell server, and in fresh interpreters (CUDA starts in the cell)",
            [python, "benchmarks/cells.py", "--device", "cuda", "--rounds", "1", "--cells", "3"],
        ),
        (
            "against a peer",
            [python, "benchmarks/peers.py", "--device", "cuda", *peer],
        ),
    ]


GPU_PROBES = {
    "jax": "import jax; print(sum(d.platform == 'gpu' for d in jax.devices()))",
    "tensorflow": "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))",
}
"""A program for each other framework that prints how many GPUs it sees."""
CUDA_BUILDS = {
    "jax": "pip install 'jax[cuda13]'",
    "tensorflow": "pip install 'tensorflow[and-cuda]'",
}


def _sees_a_gpu(probe: str) -> bool:
    """Whether a probe (GPU_PROBES) counts a GPU, asked in a process of its own."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return False
    lines = done.stdout.strip().splitlines()
    return done.returncode == 0 and bool(lines) and lines[-1] != "0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-check.md"))
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop starting steps once this many seconds have passed (a lent machine's lease)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="TEXT",
        help="leave out the steps whose title holds TEXT (again for more): a short lease's rerun",
    )
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(
            "error: make gpu-check needs a CUDA device, and torch sees none here", file=sys.stderr
        )
        return 2
    env = json.loads(
        subprocess.run(
            [sys.executable, "-m", "accelbench", "env", "--device", "cuda", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )["environment"]
    lines = [
        "# accelbench gpu-check",
        "",
        f"- device: {env['devices'][0]['name']} x{len(env['devices'])}",
        f"- driver {env['driver_version']}, CUDA {env['cuda_version']}, cuDNN "
        f"{env['cudnn_version']}, torch {env['versions'].get('torch')}",
        "",
    ]
    first_failure = 0
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        float8 = torch.cuda.get_device_capability() >= (8, 9)
        frameworks = ("torch", *(f for f, probe in GPU_PROBES.items() if _sees_a_gpu(probe)))
        for name in (f for f in GPU_PROBES if f not in frameworks):
            lines += [
                f"- {name} left out: it sees no GPU here (its CPU build, or none: "
                f"{CUDA_BUILDS[name]})",
                "",
            ]
        for title, command in steps(Path(tmp, "gpu-check.sqlite"), float8, frameworks):
            if any(text in title for text in args.skip):
                lines += [f"## {title}: left out (--skip)", ""]
                continue
            start = time.perf_counter()
            left_s = STEPS_S if args.budget_s is None else args.budget_s - (start - began)
            if left_s < 10:
                lines += [f"## {title}: not run, the budget of {args.budget_s:.0f} s was spent", ""]
                continue
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, timeout=min(STEPS_S, left_s)
                )
                code, output = done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired:
                code, output = 124, f"no end within {min(STEPS_S, left_s):.0f} s"
            first_failure = first_failure or code
            lines += [
                f"## {title}: exit {code}, {time.perf_counter() - start:.0f} s",
                "",
                "```",
                " ".join(command),
                *output.strip().splitlines()[-60:],
                "```",
                "",
            ]
            print(f"{title}: exit {code}", flush=True)
            # Written after every step: a lease that ends mid-check still leaves what ran.
            args.out.write_text("\n".join(lines))
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return first_failure


if __name__ == "__main__":
    sys.exit(main())
