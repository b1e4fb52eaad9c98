"""The generate scenario: greedy decoding of a fixed number of new tokens for a batch of prompts,
every token timed as it reaches the host.

A step is one `generate` call on a batch of spec.prompt_tokens random ids: spec.new_tokens new
tokens for each prompt, greedy, end-of-sequence ignored (min_new_tokens = max_new_tokens), so
the work is fixed. A streamer takes each new token to the host as it is made, one
synchronisation per token as a streaming server has, and the times give per call: TTFT (the call
to its first token: the prefill), the inter-token latencies (ITL) and TPOT = (E2EL - TTFT) /
(new tokens - 1). Throughput is output tokens over the steady epochs' time. With --compile the
KV cache is transformers' static cache and the forward is compiled, the fast path. Epoch 1 holds
compilation and warm-up, as everywhere.
"""

from __future__ import annotations

import itertools
import statistics
import time

import torch

from accelbench.errors import AccelbenchError
from accelbench.execution import device as dev
from accelbench.execution.precision import torch_settings
from accelbench.records.result import Metrics
from accelbench.records.spec import RunSpec
from accelbench.records.stats import summarize
from accelbench.scenarios.epochs import Raw, build_metrics, first_steady_step, measured_epochs
from accelbench.scenarios.generate import GenerateMetrics
from accelbench.scenarios.settings import Prompts
from accelbench.workload import Tokens, Workload


class _Clock:
    """A transformers streamer that notes when each token reaches the host."""

    def __init__(self) -> None:
        self.marks: list[float] = []

    def put(self, value: torch.Tensor) -> None:
        value.cpu()  # waits for the token, as a server streaming it must
        self.marks.append(time.perf_counter())

    def end(self) -> None:
        pass


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> Metrics:
    own = Prompts.of(spec)
    torch.manual_seed(spec.seed)
    start = time.perf_counter()
    settings = torch_settings(spec.precision)
    model = workload.build_model().to(device=device, dtype=settings.param_dtype).eval()
    # Pre-flight refused models that cannot generate (preflight._on_meta).
    assert hasattr(model, "generate") and isinstance(workload.reads, Tokens)
    if spec.compile:  # a cache of fixed shape, so the compiled forward is reused at every length
        model.generation_config.cache_implementation = "static"  # type: ignore[union-attr]
        model.forward = torch.compile(model.forward, mode=spec.compile_mode)
    gen = torch.Generator().manual_seed(spec.seed)
    shape = (spec.batch_size, own.prompt_tokens)
    prompts = torch.randint(workload.reads.vocab_size, shape, generator=gen).to(device)
    options = {
        "attention_mask": torch.ones_like(prompts),
        "max_new_tokens": own.new_tokens,
        "min_new_tokens": own.new_tokens,  # end-of-sequence cannot end it: fixed work
        "do_sample": False,
        "pad_token_id": 0,
    }
    with torch.inference_mode(), settings.autocast(device.type):
        # Generation computes no loss: each step's is the model's on its prompts, taken once
        # before timing (the weights do not change).
        prompt_loss = workload.loss(model, {"input_ids": prompts}).float().item()
    build_s = time.perf_counter() - start

    raw, token_ms = Raw(), []
    for _ in measured_epochs(spec, device, raw):
        for _ in range(spec.steps_per_epoch):
            clock = _Clock()
            sent = time.perf_counter()
            with torch.inference_mode(), settings.autocast(device.type):
                model.generate(prompts, streamer=clock, **options)  # type: ignore[operator]
            dev.synchronize(device)
            raw.step_ms.append((time.perf_counter() - sent) * 1e3)
            token_ms.append([(mark - sent) * 1e3 for mark in clock.marks[1:]])  # 0: the prompt
    raw.step_loss = [prompt_loss] * len(raw.step_ms)
    raw.wait_ms = [0.0] * len(raw.step_ms)  # the prompts are on the device
    raw.peak_allocated, raw.peak_reserved = dev.peak_memory_gib(device)
    raw.host_rss = dev.host_peak_rss_gib()
    metrics = build_metrics(
        spec, workload, raw, [], timer="wall-clock", build_s=build_s, flops=None
    )
    steady = token_ms[first_steady_step(spec, raw.step_ms) :]
    return metrics.model_copy(
        update={"tokens_per_item": own.new_tokens, "record": generation(spec, steady, token_ms)}
    )


def generation(
    spec: RunSpec, steady: list[list[float]], token_ms: list[list[float]]
) -> GenerateMetrics:
    """Latencies of the steady calls from each token's time since its call was sent."""
    own = Prompts.of(spec)
    for times in token_ms:
        if len(times) != own.new_tokens:
            raise AccelbenchError(
                f"the model streamed {len(times)} tokens where {own.new_tokens} were asked for"
            )
    ttft = [t[0] for t in steady]
    tpot = [(t[-1] - t[0]) / (len(t) - 1) for t in steady]
    itl = [b - a for t in steady for a, b in itertools.pairwise(t)]
    return GenerateMetrics(
        prompt_tokens=own.prompt_tokens,
        new_tokens=own.new_tokens,
        token_ms=token_ms,
        ttft_ms=summarize(ttft),
        tpot_ms=summarize(tpot),
        itl_ms=summarize(itl),
        e2el_ms=summarize([t[-1] for t in steady]),
        prefill_tokens_per_s=spec.batch_size * own.prompt_tokens / (statistics.median(ttft) / 1e3),
    )
