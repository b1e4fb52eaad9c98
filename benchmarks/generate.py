"""What the generate scenario costs: its measured calls against a bare `model.generate` loop.

Both build the same model with random weights, the same prompts and the same greedy options
(fixed work: min_new_tokens = max_new_tokens) in this process, alternating round by round
(ABBA) so drifts in clock speed or load hit both alike, after one unrecorded round of each (a
process's first measurement runs slower). accelbench's rate is its headline, prompts per second
over its steady epoch; the bare loop times as many calls after one warm-up call. Each round
gives a paired ratio, accelbench / bare (1.00: no cost); printed are their median and range.

    python benchmarks/generate.py                  # gpt2_small, batch 4, 64 + 32 tokens
    python benchmarks/generate.py --quick          # llama3_tiny: what the test suite runs
"""

from __future__ import annotations

import time
from functools import partial

import torch
from _options import paired_ratios, parse, parser, print_ratios  # benchmarks/, beside this script

from accelbench import workloads
from accelbench.execution import device as dev
from accelbench.records.spec import RunSpec
from accelbench.scenarios.generate import measure as generate
from accelbench.scenarios.settings import Prompts


def accelbench_rate(spec: RunSpec, device: torch.device) -> float:
    return generate.measure(spec, workloads.get(spec.workload), device).items_per_s


def bare_rate(spec: RunSpec, device: torch.device) -> float:
    """The loop a person would write: the same calls, timed as a whole."""
    torch.manual_seed(spec.seed)
    workload = workloads.get(spec.workload)
    model = workload.build_model().to(device).eval()
    vocab = workload.reads.vocab_size  # type: ignore[union-attr]
    gen = torch.Generator().manual_seed(spec.seed)
    own = Prompts.of(spec)
    prompts = torch.randint(vocab, (spec.batch_size, own.prompt_tokens), generator=gen).to(device)
    options = {
        "attention_mask": torch.ones_like(prompts),
        "max_new_tokens": own.new_tokens,
        "min_new_tokens": own.new_tokens,
        "do_sample": False,
        "pad_token_id": 0,
    }
    with torch.inference_mode():
        model.generate(prompts, **options)  # type: ignore[operator]  # warm-up, as epoch 1
        dev.synchronize(device)
        start = time.perf_counter()
        for _ in range(spec.steps_per_epoch):
            model.generate(prompts, **options)  # type: ignore[operator]
        dev.synchronize(device)
    return spec.steps_per_epoch * spec.batch_size / (time.perf_counter() - start)


def main() -> None:
    options = parser(__doc__, "gpt2_small", 4)
    options.add_argument("--prompt-tokens", type=int, default=64)
    options.add_argument("--new-tokens", type=int, default=32)
    args, device = parse(options)
    if args.quick:
        args.workload, args.batch_size = "llama3_tiny", 2
        args.prompt_tokens, args.new_tokens = 16, 8
    spec = RunSpec(
        workload=args.workload,
        scenario="generate",
        batch_size=args.batch_size,
        settings=Prompts(prompt_tokens=args.prompt_tokens, new_tokens=args.new_tokens),
        epochs=2,
        steps_per_epoch=max(2, args.steps // 10),
        device=device.type,
    )
    ratios = paired_ratios(
        partial(accelbench_rate, spec, device),
        partial(bare_rate, spec, device),
        args.rounds,
        "generate",
    )
    tokens = f"{args.prompt_tokens}+{args.new_tokens} tokens"
    print_ratios(f"{args.workload} bs={args.batch_size} {tokens} on {device.type}", ratios)


if __name__ == "__main__":
    main()
