"""The run spec: every knob that can change a measured number, frozen and validated."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

import orjson
from pydantic import (
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo

from accelbench import engines, scenarios, workloads
from accelbench.records import contention
from accelbench.records.frozen import Frozen, kept, last
from accelbench.records.precision import PRECISIONS, Precision
from accelbench.scenarios.base import ClientScenario, DeviceScenario, Scenario, Settings
from accelbench.secrets import scrub

_ADDED_NAMES = (
    "model_args data ci_pct max_measure_s repeat replicas nodes bn_span numa_binding "
    "recompute pipeline_stages pipeline_schedule inputs_on_device rate_per_s "
    "latency_bound_ms batch_timeout_ms num_queries target max_steps lr_scaling "
    "lr_base_batch warmup_steps diverge_factor threads compile_mode cudnn_benchmark fsdp "
    "fsdp_offload tensor_parallel sequence_parallel prompt_tokens new_tokens endpoint "
    "platform lengths slo_ttft_ms slo_tpot_ms request_timeout_s code_digest api_key_env "
    "chat burstiness ramp_to_per_s trace power_series lora_rank lora_alpha lora_targets "
    "framework min_steady_s"
)
_ADDED_LATER = tuple(_ADDED_NAMES.split())
"""Fields added after the first release, new ones last: left out of a cell's identity while at
their default, so that stored results keep their keys."""
STORED = {"stored": True}
"""The validation context of records read back from a store or an export: a knob of another
scenario, which specs before the nesting could hold at other than its default, is dropped there,
not refused."""
MAX_REPEATS = 1000
"""The most repeats (and seeds) of one cell a sweep runs."""
Optimizer = Literal["sgd", "adamw"]
DeviceType = Literal["auto", "cpu", "cuda", "xpu", "mps"]
NumaBinding = Literal["node", "socket", "exclusive", "core-complex"]


class RunSpec(Frozen):
    """One cell of a sweep: a workload measured once in one scenario with one configuration."""

    model_config = Frozen.model_config | ConfigDict(allow_inf_nan=False)  # no rate of inf/s
    workload: str
    """Workload name, as `accelbench list` shows it."""
    scenario: str = "train"
    """How it is measured: a registered scenario (knobs() lists each with its summary)."""
    framework: str = "torch"
    """The engine that runs the cell: torch, or jax or tensorflow for the workloads and
    scenarios each has (accelbench/engines), built from the same config as torch's."""
    device: DeviceType = "auto"
    """torch device type; auto picks the accelerator torch reports, else the CPU."""
    batch_size: int = Field(gt=0, le=2**24)
    """Micro batch: items per forward pass on one device (serve: requests in flight at once,
    each client sending its next as its last one ends)."""
    grad_accum: int = Field(default=1, gt=0, le=2**16)
    """Micro batches accumulated into one optimizer step."""
    replicas: int = Field(default=1, gt=0, le=100_000)
    """Data-parallel replicas, one process and one device each, started by torchrun with
    DistributedDataParallel (NCCL on NVIDIA GPUs, gloo on the CPU)."""
    fsdp: bool = False
    """Shard weights, gradients and optimizer state over the replicas instead of copying them to
    each (torch's FSDP2: fully_shard on every transformer block and on the whole model), with
    bf16 weights and fp32 gradient reduction under amp-bf16; on one replica too, as a baseline."""
    fsdp_offload: bool = False
    """With fsdp: keep the shards and the optimizer's step in host memory (CPUOffloadPolicy),
    for a model too large for the devices at the cost of copies every step."""
    tensor_parallel: int = Field(default=1, gt=0, le=1024)
    """Devices each layer's matmuls are split over (torch's parallelize_module with the model's
    own plan: attention and MLP projections column-wise, then row-wise), in a 2-D device mesh of
    replicas x tensor_parallel; a replica then spans this many devices and processes."""
    sequence_parallel: bool = False
    """With tensor_parallel: also split the norms and the activations between layers along the
    sequence over those devices (Megatron's sequence parallelism), for less activation memory
    at the same communication volume."""
    pipeline_stages: int = Field(default=1, gt=0, le=1024)
    """Stages the model is split into, one device and process each, fed grad_accum
    micro-batches per optimizer step by torch.distributed.pipelining (the PEARC '22 study's IPUs per
    replica); split where the forward FLOPs balance."""
    pipeline_schedule: Literal["gpipe", "1f1b"] = "gpipe"
    """Order of the micro-batches' forward and backward passes over the stages."""
    nodes: int = Field(default=1, gt=0, le=100_000)
    """Hosts the replicas are spread over, evenly; more than one needs a Slurm allocation."""
    bn_span: int = Field(default=1, gt=0)
    """Replicas whose batch-norm statistics are computed together (SyncBatchNorm in groups of
    this many; 1: each replica its own), Graphcore's BN_span."""
    numa_binding: NumaBinding | None = None
    """Bind each rank and its loader workers to the CPUs near its accelerator (torchrun's
    --numa-binding mode); None: leave placement to the OS."""
    epochs: int = Field(default=2, gt=0, le=100_000)
    """Epochs; the first holds compilation and warm-up and is reported apart (time-to-train:
    as many as reaching the target takes)."""
    steps_per_epoch: int = Field(default=20, gt=0, le=10**9)
    """Optimizer steps in each epoch; time-to-train evaluates the held-out split after each."""
    precision: Precision = "fp32"
    """Numeric precision: fp32, tf32, amp-fp16, amp-bf16, bf16, fp16, int8-dynamic (CPU
    inference) or fp8 (float8 training, NVIDIA compute capability 8.9 and later)."""
    compile: bool = False
    """Run the model through torch.compile."""
    compile_mode: Literal["default", "reduce-overhead", "max-autotune"] = "default"
    """torch.compile's mode, with compile: reduce-overhead replays CUDA graphs, max-autotune also
    searches kernels (its compilation is in the first epoch, apart from the steady state)."""
    cudnn_benchmark: Literal["auto", "on", "off"] = "auto"
    """cuDNN autotuning (torch.backends.cudnn.benchmark): auto is on for workloads whose shapes
    are fixed and off for those whose shapes vary, where it would tune at every new shape."""
    channels_last: bool = False
    """Channels-last memory format for the model and its image inputs."""
    inputs_on_device: bool = False
    """Device-resident input: a few synthetic batches made on the device once and cycled (infer:
    the queries), as NVIDIA's DeepLearningExamples and timm's benchmark do, to show the compute
    ceiling; off: each batch made on the host and copied through the DataLoader in its time."""
    platform: str | None = Field(default=None, min_length=1, max_length=200)
    """The platform's name as the centre calls it, a cluster or partition ("jureca-dc",
    "booster"; the command line's default: $ACCELBENCH_PLATFORM, else Slurm's
    $SLURM_CLUSTER_NAME), kept beside the device model so that two clusters with the same
    devices stay apart; serve: what the server runs on, in the user's words ("8x H100 SXM,
    vLLM 0.11"), which the client's own host is not."""
    lora_rank: int | None = Field(default=None, gt=0, le=4096)
    """train: fine-tune LoRA adapters of this rank (peft) on lora_targets, every other weight
    frozen; None: train every weight."""
    lora_alpha: float = Field(default=16.0, gt=0)
    """train: LoRA's scale numerator (the update is scaled by alpha / rank)."""
    lora_targets: str = Field(default="all-linear", pattern=r"^[A-Za-z0-9_.,-]+$")
    """train: the modules that get adapters, comma-separated names (q_proj,v_proj), or
    all-linear (peft: every linear layer but the output head)."""
    lr_scaling: Literal["fixed", "linear"] = "fixed"
    """fixed: lr as given; linear: lr x global batch / lr_base_batch (Goyal et al. 2017), so
    the learning rate follows the global batch when it changes."""
    lr_base_batch: int = Field(default=256, gt=0)
    """The global batch that lr is meant for, under linear scaling."""
    warmup_steps: int = Field(default=0, ge=0)
    """Optimizer steps over which the learning rate ramps linearly up to its value."""
    recompute: bool = False
    """Activation checkpointing (timm and transformers models): recompute activations in the
    backward pass instead of keeping them, trading compute for memory."""
    optimizer: Optimizer = "sgd"
    """sgd (momentum 0.9) or adamw."""
    lr: float = Field(default=0.01, gt=0)
    """Learning rate."""
    threads: Annotated[int, Field(gt=0)] | Literal["auto"] | None = None
    """torch's CPU threads in each process (torch.set_num_threads). "auto", and unset for a CPU
    cell of one process: the CPUs other work leaves free as the sweep starts (the record's
    env.torch_num_threads says how many); else unset: one per process under torchrun."""
    workers: Annotated[int, Field(ge=0, le=256)] | Literal["auto"] = 0
    """DataLoader worker processes generating the host data (0: in the training process);
    "auto": loader_workers() chooses, and the record says how many."""
    window_steps: int = Field(default=2, gt=0)
    """Optimizer steps per throughput window, for the spread of the windows (a secondary
    statistic; the headline's interval is from batch means over the steady steps)."""
    ci_pct: float | None = Field(default=None, gt=0)
    """Measure more epochs, past `epochs`, until the 95% confidence interval of the delivered
    throughput is within +-this percent over a steady state long enough to judge (0.25 s), or
    max_measure_s runs out; None: no interval target."""
    min_steady_s: float = Field(default=0.25, ge=0)
    """Measure more epochs, past `epochs`, until the steady state lasts this long (as timeit's
    autorange and torch's blocked_autorange run a small step more often), or max_measure_s runs
    out: a shorter one is flagged too-short, since no CPU reading can tell whether other work
    shared it. 0: exactly `epochs` (with no --ci)."""
    max_measure_s: float = Field(default=600.0, gt=0)
    """Time budget of the epochs run to reach ci_pct and min_steady_s, an upper bound: no epoch
    starts that would end past it (the first `epochs` always run)."""
    repeat: int = Field(default=0, ge=0)
    """Index of a repeat of the same cell, each in a fresh process (--repeats N runs 0..N-1)."""
    seed: int = Field(default=0, ge=-(2**63), lt=2**64)
    """Seed of weights and synthetic data."""
    model_args: dict[str, int | float | bool | str] = Field(default_factory=dict)
    """Overrides of the workload's shape or model (image_size, seq_len, num_layers, ...); for
    timm/ and hf/ workloads, any model or config argument."""
    code_digest: str | None = None
    """A user's model file as it was when the cell was planned (workloads.file_digest, set by
    the sweep, not given): part of the key, so an edited file is measured again, its old
    results kept; None for every other workload."""
    data: str | None = None
    """Real local data instead of synthetic: an ImageFolder directory, webdataset .tar shards (a
    file, a directory of them or a {000..009} pattern), an MNIST IDX images file, a .npy file
    of token ids, or sklearn:digits (scikit-learn's 1,797 handwritten digits)."""
    settings: SerializeAsAny[Settings] = Field(default_factory=Settings)
    """The scenario's own knobs (its Settings, declared in its folder), given and stored flat
    beside these."""

    @field_validator("workload")
    @classmethod
    def _known_workload(cls, name: str) -> str:
        return workloads.check_name(name)

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any, info: ValidationInfo) -> Any:
        """Flat knobs in, the scenario's own ones moved into `settings`. A knob of another
        scenario is refused unless it holds its default (which every stored record from before
        the nesting holds; records read from a store may hold others, which are dropped)."""
        if not isinstance(data, dict):
            return data
        name = data.get("scenario", "train")
        try:
            scenario = scenarios.get(name) if isinstance(name, str) else None
        except ValueError:
            scenario = None
        if scenario is None:
            return data  # _known_scenario names the known ones
        flat, own = dict(data), scenario.settings.model_fields
        given = flat.pop("settings", {})
        if isinstance(given, Settings) and not isinstance(given, scenario.settings):
            raise ValueError(f"settings of {type(given).__name__} are not {name}'s")
        if not isinstance(given, dict | Settings):
            raise ValueError(f"settings is a table of {name}'s own knobs, not {given!r}")
        given = dict(given)
        nested = {**given, **{k: flat.pop(k) for k in list(flat) if k in own}}
        stored = bool(info.context and info.context.get("stored"))
        owned, common = _tables()[1], cls.model_fields  # a property: read once
        for key in [k for k in flat if k not in common and k in owned]:
            other = owned[key][0]
            if stored or _holds_default(other, key, flat[key]):
                del flat[key]
            else:
                raise ValueError(f"--{key.replace('_', '-')} goes with --scenario {other.name}")
        return flat | {"settings": scenario.settings.model_validate(nested)}

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The knobs flat, the scenario's own beside every cell's: stored records, exports and
        keys read as they did before settings were nested."""
        dumped: dict[str, Any] = handler(self)
        return dumped | dumped.pop("settings")

    @model_validator(mode="after")
    def _settings_agree(self) -> RunSpec:
        if self.num_processes % self.nodes:
            raise ValueError(
                f"{self.num_processes} devices do not spread evenly over {self.nodes} nodes: "
                "give --replicas (x --tensor-parallel x --pipeline-stages) as a multiple of --nodes"
            )
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise ValueError(
                "--sequence-parallel splits tensor-parallel work: add --tensor-parallel 2 or more"
            )
        if self.fsdp_offload and not self.fsdp:
            raise ValueError("--fsdp-offload offloads FSDP's shards: add --fsdp")
        if self.pipeline_stages > 1 and (self.fsdp or self.tensor_parallel > 1):
            raise ValueError(
                "pipeline stages are not combined with --fsdp or --tensor-parallel yet: "
                "give one of them"
            )
        if (self.fsdp or self.tensor_parallel > 1) and PRECISIONS[self.precision].grad_scaler:
            raise ValueError(
                f"{self.precision} scales the loss, which sharded weights do not support yet: "
                "give --fsdp and --tensor-parallel amp-bf16, bf16 or fp32"
            )
        if self.fsdp and self.bn_span > 1:
            raise ValueError("--bn-span syncs batch norm across copies of a model: not with --fsdp")
        if self.pipeline_stages > 1 and self.replicas > 1:
            raise ValueError(
                "pipeline stages run one replica so far: give --replicas 1 with --pipeline-stages"
            )
        scenario = scenarios.get(self.scenario)
        precision = PRECISIONS[self.precision]
        if precision.training_only and (
            not scenario.trains or self.pipeline_stages > 1 or self.tensor_parallel > 1
        ):
            raise ValueError(
                f"precision {self.precision} trains on one device, with replicas or --fsdp: "
                "leave out --pipeline-stages and --tensor-parallel, and give --scenario train"
            )
        if scenario.trains and precision.inference_only:
            raise ValueError(
                f"precision {self.precision} is for inference: add --scenario infer or server"
            )
        family = workloads.measured_by(self.workload)  # served/ or micro/: their scenarios
        kind = {"client": ClientScenario, "device": DeviceScenario}[family[0]] if family else None
        if family and kind and not isinstance(scenario, kind):
            names = " or ".join(s.name for s in scenarios.all_scenarios() if isinstance(s, kind))
            raise ValueError(f"{family[1]}: give it with --scenario {names}")
        if not scenario.trains and (self.grad_accum > 1 or self.recompute):
            raise ValueError(
                f"{self.scenario} takes no optimizer steps: leave out --grad-accum and --recompute"
            )
        if not scenario.distributes and self.distributed:
            raise ValueError(
                f"{self.scenario} runs one process: leave out --replicas, --pipeline-stages, "
                "--tensor-parallel and --fsdp"
            )
        scenario.rules(self)
        engines.get(self.framework).check(self)
        if self.pipeline_schedule == "1f1b" and self.grad_accum < self.pipeline_stages:
            raise ValueError(
                f"1F1B needs at least one micro-batch per stage: give --grad-accum "
                f"{self.pipeline_stages} or more"
            )
        if self.compile_mode != "default" and not self.compile:
            raise ValueError(f"--compile-mode {self.compile_mode} goes with --compile")
        if self.inputs_on_device and self.data is not None:
            raise ValueError(
                "--inputs-on-device cycles a few synthetic batches: leave it out with --data, "
                "which reads real data"
            )
        if self.lora_rank is None and (self._given("lora_alpha") or self._given("lora_targets")):
            raise ValueError("--lora-alpha and --lora-targets shape adapters: add --lora-rank")
        if self.lora_rank is not None and (
            not scenario.trains or self.tensor_parallel > 1 or self.pipeline_stages > 1
        ):
            raise ValueError(
                "--lora-rank fine-tunes: give --scenario train, without --tensor-parallel or "
                "--pipeline-stages"
            )
        if self.replicas % self.bn_span:
            raise ValueError(
                f"--bn-span {self.bn_span} does not divide {self.replicas} replicas into groups"
            )
        return self

    @field_validator("scenario")
    @classmethod
    def _known_scenario(cls, name: str) -> str:
        scenarios.get(name)
        return name

    @field_validator("framework")
    @classmethod
    def _known_framework(cls, name: str) -> str:
        engines.get(name)
        return name

    def _given(self, name: str) -> bool:
        """Whether a field holds other than its default."""
        default = RunSpec.model_fields[name].get_default(call_default_factory=True)
        return bool(getattr(self, name) != default)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy, unvalidated as pydantic's are, that also takes the knobs of the scenario it
        is for by their flat names (a changed scenario starts from its settings' defaults)."""
        update = dict(update or {})
        scenario = update.get("scenario", self.scenario)
        kind = scenarios.get(scenario).settings
        own = {k: update.pop(k) for k in list(update) if k in kind.model_fields}
        if own or scenario != self.scenario:
            kept = dict(self.settings) if scenario == self.scenario else {}
            update["settings"] = kind.model_validate(kept | own)
        if unknown := [k for k in update if k not in RunSpec.model_fields]:
            raise ValueError(f"{scenario} has no knob {unknown[0]!r}")
        return super().model_copy(update=update, deep=deep)

    def knob(self, name: str) -> Any:
        """A knob's value by its flat name, whoever declares it: None where this cell's
        scenario has no such knob (KeyError for a name no scenario has)."""
        if name in RunSpec.model_fields and name != "settings":
            return getattr(self, name)
        if name not in knobs():
            raise KeyError(name)
        return getattr(self.settings, name, None)

    def loader_workers(self) -> int:
        """Each rank's loader processes: `workers`, or for "auto" none on the CPU (they would
        take the model's cores), on an accelerator the CPUs this process may use shared among
        the node's ranks, one left to each, at most 8 (one core fed ResNet-50 1,645 images/s)."""
        if self.workers != "auto":
            return self.workers
        if self.device == "cpu":
            return 0
        return max(1, min(8, contention.usable_cpus() // self.processes_per_node - 1))

    def identity(self) -> dict[str, Any]:
        """The fields that identify the cell, as JSON: all of them, except fields added after the
        first release while they hold their default, so that stored results keep their keys;
        a URL's password is not part of it (a stored spec holds none)."""
        fields = {k: scrub(v) if isinstance(v, str) else v for k, v in spec_dump(self).items()}
        for name, default in _tables()[2].items():
            if name in fields and fields[name] == default:
                del fields[name]
        return fields

    @property
    def num_processes(self) -> int:
        """Processes, one device each: replicas x tensor parallel x pipeline stages."""
        return self.replicas * self.tensor_parallel * self.pipeline_stages

    @property
    def distributed(self) -> bool:
        """Whether the cell runs under torchrun in a process group: several processes, or FSDP
        (which shards over a device mesh, of one device too)."""
        return self.num_processes > 1 or self.fsdp

    @property
    def processes_per_node(self) -> int:
        return self.num_processes // self.nodes

    @property
    def global_batch(self) -> int:
        """Items per optimizer step over all replicas."""
        return self.batch_size * self.grad_accum * self.replicas

    @property
    def scaled_lr(self) -> float:
        """The learning rate after lr_scaling."""
        if self.lr_scaling == "linear":
            return self.lr * self.global_batch / self.lr_base_batch
        return self.lr


def knobs() -> dict[str, FieldInfo]:
    """Every knob a spec can hold, flat: the fields every cell shares, then each registered
    scenario's own (a knob two scenarios share, declared once in scenarios.settings, once).
    Made once per set of registered scenarios: read it, do not change it."""
    return _tables()[0]


def owners(name: str) -> list[Scenario]:
    """The scenarios whose own settings hold a knob of this name."""
    return _tables()[1].get(name, [])


_Tables = tuple[dict[str, FieldInfo], dict[str, list[Scenario]], dict[str, Any]]
_TABLES: list[tuple[list[Scenario], _Tables]] = []
"""The scenarios the tables were made for (held, so that none is mistaken for another), and
the tables."""


def _tables() -> _Tables:
    """knobs(), each scenario knob's owners and the defaults of the knobs added later (a key
    leaves them out, 31 looked up for every key otherwise: a twentieth of an import's), for the
    scenarios registered now: a stored record of before the nesting holds twenty knobs of other
    scenarios, each looked up."""
    registered = scenarios.loadable()
    if _TABLES and len(_TABLES[0][0]) == len(registered):
        made_for, tables = _TABLES[0]
        if all(a is b for a, b in zip(made_for, registered, strict=True)):
            return tables
    found = {k: v for k, v in RunSpec.model_fields.items() if k != "settings"}
    found["scenario"] = copy.copy(found["scenario"])  # its help names the registered ones
    found["scenario"].description = "How it is measured: " + "; ".join(
        f"{s.name} ({s.summary})" for s in registered
    )
    owned: dict[str, list[Scenario]] = {}
    for scenario in registered:
        for name, field in scenario.settings.model_fields.items():
            found.setdefault(name, field)
            owned.setdefault(name, []).append(scenario)
    added = {n: found[n].get_default(call_default_factory=True) for n in _ADDED_LATER if n in found}
    _TABLES[:] = [(registered, (found, owned, added))]
    return found, owned, added


def _holds_default(scenario: Scenario, name: str, value: Any) -> bool:
    """Whether a value of a scenario's knob, as validated, is its default."""
    try:
        settings = scenario.settings.model_validate({name: value})
    except ValidationError:
        return False
    return bool(getattr(settings, name) == scenario.settings.model_fields[name].default)


def sorted_json(value: object) -> str:
    """Compact JSON with sorted keys, by orjson (a third of json's time), or by json where orjson
    refuses (an integer past 64 bits, as a model arg may be). For specs and environments, which
    hold no NaN or infinity (orjson would write null); not stable_hash's text, which stays
    json's so that stored keys keep."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))


def stable_hash(*parts: object) -> str:
    """A short hash of JSON-able parts that is the same on every machine and Python version."""
    return hashed(*map(stable_text, parts))


def stable_text(part: object) -> str:
    """The text stable_hash hashes of one part."""
    return json.dumps(part, sort_keys=True, separators=(",", ":"))


def hashed(*texts: str) -> str:
    """stable_hash of the parts whose stable_text these are: json writes a list as its items'
    texts between commas, so the text hashed is the same."""
    return hashlib.sha256(f"[{','.join(texts)}]".encode()).hexdigest()[:20]


@last
def spec_dump(spec: RunSpec) -> dict[str, Any]:
    """The spec as model_dump(mode="json") writes it, made once for the last spec asked for (a
    listing reads one result up to eight ways); not to be changed: it is shared."""
    return spec.model_dump(mode="json")


@kept
def identity_text(spec: RunSpec) -> str:
    """The spec's identity() as its result's key hashes it, made once a spec (an import's
    records share their specs)."""
    return stable_text(spec.identity())
