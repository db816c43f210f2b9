"""A training recipe (report §4.3): a run directory and an ordered list of named stages, run in order.

    run_dir: runs/ondevice-tiny
    seed: 0
    stages:
      - {name: corpus, kind: corpus, sources: [bible-kjv-text, python-stdlib], limit_per_source: 150}
      - {name: tok, kind: tokenizer, corpus: corpus, vocab_size: 2048}
      - {name: shards, kind: shards, corpus: corpus, tokenizer: tok, heldout_fraction: 0.05, hq_fraction: 0.5}
      - name: dense
        kind: train
        model: {preset: afm-ondevice-tiny, changes: {dim: 128, n_layers: 8}}   # or from: <stage>
        data: {shards: shards, subset: train, mixture: {weights: {general: 0.6, code: 0.2, math: 0.2}}}
        train: {steps: 300, batch_size: 8, seq_len: 128}                       # any TrainConfig keys
      - {name: moe, kind: upcycle, from: dense, n_experts: 8, every: 2, top_k: 2}
      - {name: kd, kind: distill, from: dense, teacher: moe, kd: {kd_kind: full}, data: ..., train: ...}
      - {name: eval, kind: eval, shards: shards, models: [dense, kd], context: 128}

Stage kinds (`StageKind`): corpus (curated JSONL: `openafm data build`, or an existing JSONL directory),
tokenizer (byte-level BPE trained on the corpus), shards (token shards split into train / held-out by a
hash of the document id, plus the high-quality subset of the train part), train (the project's Trainer;
the model is a preset with changes or the model of an earlier stage, optionally with `model_changes` such
as a larger rope_theta), upcycle (dense -> MoE), distill (train with objective kd and `teacher: <stage>`),
eval (held-out perplexity of named stages); post-training (pipelines/posttrain.py): synth (rejection-sampled
chat examples a verifier accepts), sft (LoRA SFT merged into the weights), rl (synchronous RLOO), tasks (the
evaluation registry's tasks on model stages, or base:<model>), package (an sft stage's adapter as a bundled
model with its sidecar); vision (a vision tower trained against a frozen decoder, pipelines/vision.py). Every
reference must name an earlier stage of a fitting kind;
all of it is checked when the recipe loads, before anything runs. Running it: `openafm.pipelines.run`.
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any

from openafm import config as cfg
from openafm.checkpoint.packaged import BUNDLED
from openafm.data.document import Document
from openafm.data.mixture import MixtureConfig
from openafm.data.pipeline.executor import ExecutorKind
from openafm.data.sources import SOURCES
from openafm.errors import ConfigError
from openafm.eval.registry import get_task
from openafm.io import read_yaml
from openafm.pipelines.kinds import StageKind
from openafm.pipelines.vision import VisionStage
from openafm.pipelines.sft_data import Builtin, check_sizes, is_builtin
from openafm.rl.config import RLConfig
from openafm.rl.prompts import PromptSource
from openafm.rl.rewards.registry import REWARDS, UnknownRewardError
from openafm.train.config import TrainConfig


# stages whose output is a model
MODEL_KINDS = (StageKind.TRAIN, StageKind.UPCYCLE, StageKind.DISTILL, StageKind.SFT, StageKind.RL)
BASE_PREFIX = "base:"        # a `tasks` stage's model that is no stage: base:<what openafm.load accepts>


class Subset(str, enum.Enum):
    TRAIN = "train"        # every training document (held-out documents excluded)
    HQ = "hq"              # the high-quality subset: per domain, the top hq_fraction of train documents by
    #                        the data pipeline's quality-model score (meta.quality_score)
    HELDOUT = "heldout"    # documents never trained on (only the eval stage reads them)


@dataclasses.dataclass(kw_only=True)
class CorpusStage:
    name: str
    kind: StageKind = StageKind.CORPUS
    sources: list[str] | None = None       # run the curation pipeline over these sources ...
    limit_per_source: int = 150
    shard_size: int = 500
    input: str | None = None               # ... and/or the user's files (a glob; format from each suffix) ...
    jsonl_dir: str | None = None           # ... or use an existing curated corpus ({domain}/*.jsonl)
    executor: str = "local"                # where the build runs: "local" or "ray" (data/pipeline/executor.py)
    workers: int = 1                       # ray: concurrent one-CPU workers
    address: str | None = None             # ray: a running cluster's head HOST:PORT; None starts a local Ray

    def __post_init__(self) -> None:
        builds = self.sources is not None or self.input is not None
        if builds == (self.jsonl_dir is not None):
            raise ConfigError(f"stage {self.name!r}: a corpus stage takes sources and/or input (build it) or "
                              f"jsonl_dir (an existing corpus), got sources={self.sources}, input={self.input}, "
                              f"jsonl_dir={self.jsonl_dir}")
        accepted = [k.value for k in ExecutorKind]
        if self.executor not in accepted:
            raise ConfigError(f"stage {self.name!r}: executor {self.executor!r} is not one of {accepted}")
        if self.sources is not None:
            unknown = sorted(set(self.sources) - set(SOURCES))
            if unknown:
                raise ConfigError(f"stage {self.name!r}: unknown sources {unknown}; accepted: {sorted(SOURCES)}")


@dataclasses.dataclass(kw_only=True)
class TokenizerStage:
    name: str
    kind: StageKind = StageKind.TOKENIZER
    corpus: str
    vocab_size: int = 2048
    min_frequency: int = 2
    max_docs: int | None = None            # train on at most this many documents (None: all)


@dataclasses.dataclass(kw_only=True)
class ShardsStage:
    name: str
    kind: StageKind = StageKind.SHARDS
    corpus: str
    tokenizer: str
    heldout_fraction: float = 0.05         # documents held out by a hash of their id, never trained on
    hq_fraction: float = 0.5               # per domain, this top fraction of train documents by quality score
    # domains the hq subset takes whole (the quality model scores only English general text; curated code,
    # math and multilingual sources carry no score); a train document outside these needs meta.quality_score
    hq_whole_domains: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        bad = sorted(set(self.hq_whole_domains) - set(Document.DOMAINS))
        if bad:
            raise ConfigError(f"stage {self.name!r}: hq_whole_domains {bad} are not domains; accepted: {Document.DOMAINS}")
        for key in ("heldout_fraction", "hq_fraction"):
            if not 0 < getattr(self, key) < 1:
                raise ConfigError(f"stage {self.name!r}: {key}={getattr(self, key)} must be in (0, 1)")


@dataclasses.dataclass(kw_only=True)
class ModelSpec:
    preset: str
    changes: dict[str, Any] = dataclasses.field(default_factory=dict)   # DecoderConfig fields; n_layers
    #                                                                    rebuilds the KV-sharing layer plan


@dataclasses.dataclass(kw_only=True)
class DataSpec:
    shards: str                            # a shards stage
    subset: Subset = Subset.TRAIN
    mixture: MixtureConfig = dataclasses.field(default_factory=MixtureConfig)
    skip_steps: int = 0                    # start the stream this many steps in (continue where a stage stopped)

    def __post_init__(self) -> None:
        if self.subset is Subset.HELDOUT:
            raise ConfigError("data.subset=heldout: held-out documents are never trained on; accepted: train, hq")
        if self.skip_steps < 0:
            raise ConfigError(f"data.skip_steps={self.skip_steps} must be >= 0")


@dataclasses.dataclass(kw_only=True)
class KDSpec:
    kd_kind: str = "full"                  # "full" or "top-k"
    top_k: int | None = None
    temperature: float = 1.0
    kd_weight: float = 1.0


# TrainConfig keys the recipe fills itself (the rest go in a stage's `train:` mapping).
RECIPE_TRAIN_KEYS = ("model", "run_dir", "data", "objective")


@dataclasses.dataclass(kw_only=True)
class TrainStage:
    name: str
    kind: StageKind = StageKind.TRAIN
    model: ModelSpec | None = None         # a fresh model ...
    from_: str | None = None               # ... or the model of an earlier stage (YAML key `from`)
    model_changes: dict[str, Any] = dataclasses.field(default_factory=dict)  # with from: e.g. rope_theta
    data: DataSpec
    train: dict[str, Any] = dataclasses.field(default_factory=dict)         # TrainConfig keys
    teacher: str | None = None             # distill only
    kd: KDSpec | None = None               # distill only

    def __post_init__(self) -> None:
        if (self.model is None) == (self.from_ is None):
            raise ConfigError(f"stage {self.name!r}: a {self.kind.value} stage takes exactly one of model (a preset "
                              f"with changes) or from (an earlier stage), got model={self.model}, from={self.from_}")
        if self.model_changes and self.from_ is None:
            raise ConfigError(f"stage {self.name!r}: model_changes={self.model_changes} apply to a `from:` model; "
                              f"put a fresh model's changes in model.changes")
        taken = sorted(set(self.train) & set(RECIPE_TRAIN_KEYS))
        if taken:
            raise ConfigError(f"stage {self.name!r}: train keys {taken} are set by the recipe (model/from, data, "
                              f"teacher); remove them from `train:`")
        if self.kind is StageKind.DISTILL and self.teacher is None:
            raise ConfigError(f"stage {self.name!r}: a distill stage needs teacher: <stage>")
        if self.kind is StageKind.TRAIN and (self.teacher is not None or self.kd is not None):
            raise ConfigError(f"stage {self.name!r}: teacher / kd belong to kind distill, not train")


@dataclasses.dataclass(kw_only=True)
class UpcycleStage:
    name: str
    kind: StageKind = StageKind.UPCYCLE
    from_: str
    n_experts: int = 8
    every: int = 2
    top_k: int = 2
    router_std: float = 0.02


@dataclasses.dataclass(kw_only=True)
class EvalStage:
    name: str
    kind: StageKind = StageKind.EVAL
    shards: str
    models: list[str]
    context: int = 128                     # tokens per perplexity window
    max_tokens: int | None = 65536         # per domain (None: every held-out token)

    def __post_init__(self) -> None:
        if not self.models:
            raise ConfigError(f"stage {self.name!r}: models is empty; name the stages to evaluate")
        if self.context < 2:
            raise ConfigError(f"stage {self.name!r}: context={self.context} must be >= 2")


@dataclasses.dataclass(kw_only=True)
class PromptSpec:
    source: PromptSource
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True)
class SynthStage:
    name: str
    kind: StageKind = StageKind.SYNTH
    model: str | None = None
    from_: str | None = None
    prompts: PromptSpec
    reward: str
    reward_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    threshold: float = 1.0                 # a sample is kept when its reward reaches this
    n: int = 64
    k: int = 8
    max_tokens: int = 128
    temperature: float = 0.8
    top_p: float = 0.95


class SFTAdapter(str, enum.Enum):
    """Which LoRA adapter an sft stage trains."""
    NEW = "new"              # a fresh adapter on its model
    CONTINUE = "continue"    # the adapter of the bundled model its model names, further, on that bundle's base (rank,
                             # alpha and targets are the adapter's; the stage's adapter is tied to the same base)


DEFAULT_SFT_RANK = 16


@dataclasses.dataclass(kw_only=True)
class SFTStage:
    name: str
    kind: StageKind = StageKind.SFT
    model: str | None = None
    from_: str | None = None
    data: list[str]                        # synth stages, JSONL files of chat examples, built-in sets (sft_data.py)
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)   # examples drawn from a sized built-in set
    adapter: SFTAdapter = SFTAdapter.NEW
    rank: int | None = None                # NEW: DEFAULT_SFT_RANK when None; CONTINUE: the adapter's
    alpha: float | None = None
    sft: dict[str, Any] = dataclasses.field(default_factory=dict)     # TrainConfig keys (steps, batch_size, ...)


class RLTrains(str, enum.Enum):
    """What an rl stage trains."""
    WEIGHTS = "weights"      # every weight of its model
    ADAPTER = "adapter"      # its model's LoRA adapter, on that adapter's base: an sft stage's (from) or a bundled
                             # model's (model); the stage then writes an adapter file, which a package stage ships


@dataclasses.dataclass(kw_only=True)
class RLStage:
    name: str
    kind: StageKind = StageKind.RL
    model: str | None = None
    from_: str | None = None
    trains: RLTrains = RLTrains.WEIGHTS
    rl: dict[str, Any]                     # RLConfig keys but model, run_dir (and adapter, when it trains one)


@dataclasses.dataclass(kw_only=True)
class TasksStage:
    name: str
    kind: StageKind = StageKind.TASKS
    models: list[str]                      # model stages, or base:<model>
    tasks: list[str]
    limit: int = 32


@dataclasses.dataclass(kw_only=True)
class PackageStage:
    name: str
    kind: StageKind = StageKind.PACKAGE
    from_: str                             # the sft stage, or rl stage that trains an adapter, whose adapter ships
    bundle: str                            # the name openafm.load will accept (checkpoint/bundled.py)
    figures: list[str] = dataclasses.field(default_factory=list)    # tasks stages whose results the sidecar quotes
    install_dir: str | None = None         # also copy the two files here (the package's model_weights folder)


def _check_model_source(stage) -> None:
    if (stage.model is None) == (stage.from_ is None):
        raise ConfigError(f"stage {stage.name!r}: a {stage.kind.value} stage takes exactly one of model (what "
                          f"openafm.load accepts) or from (an earlier model stage), got model={stage.model}, "
                          f"from={stage.from_}")


def _validate_posttrain(stage) -> None:
    """Checks that need no other stage (references are checked by recipe.validate)."""
    if isinstance(stage, (SynthStage, SFTStage, RLStage)):
        _check_model_source(stage)
    if isinstance(stage, SynthStage) and (stage.n < 1 or stage.k < 1):
        raise ConfigError(f"stage {stage.name!r}: n={stage.n} and k={stage.k} must be >= 1")
    if isinstance(stage, SynthStage) and stage.reward not in REWARDS:
        raise UnknownRewardError(stage.reward, sorted(REWARDS))
    if isinstance(stage, SFTStage):
        if not stage.data:
            raise ConfigError(f"stage {stage.name!r}: data is empty; name synth stages, JSONL files or built-in sets "
                              f"{[b.value for b in Builtin]}")
        check_sizes(stage.sizes, stage.data, f"stage {stage.name!r}")
        if stage.adapter is SFTAdapter.CONTINUE and (stage.model not in BUNDLED or stage.rank is not None
                                                          or stage.alpha is not None):
            raise ConfigError(f"stage {stage.name!r}: adapter: continue trains a bundled model's adapter further; "
                              f"model={stage.model!r} must name one ({sorted(BUNDLED)}) and rank / alpha "
                              f"(got {stage.rank} / {stage.alpha}) are the adapter's own, so leave them out")
        TrainConfig.from_dict({"model": "-", "run_dir": "-", "steps": 1, "batch_size": 1, "seq_len": 1, **stage.sft})
    if isinstance(stage, RLStage):
        taken = sorted(({"model", "run_dir"} | ({"adapter"} if stage.trains is RLTrains.ADAPTER else set()))
                       & set(stage.rl))
        if taken:
            raise ConfigError(f"stage {stage.name!r}: rl keys {taken} are set by the recipe; remove them")
        RLConfig.from_dict({"model": "-", "run_dir": "-", **stage.rl})
        if stage.trains is RLTrains.ADAPTER and stage.model is not None and stage.model not in BUNDLED:
            raise ConfigError(f"stage {stage.name!r}: trains: adapter continues an adapter; model={stage.model!r} "
                              f"has none (bundled models: {sorted(BUNDLED)}; or take from an sft stage)")
    if isinstance(stage, TasksStage):
        for t in stage.tasks:
            get_task(t)
        if stage.limit < 1:
            raise ConfigError(f"stage {stage.name!r}: limit={stage.limit} must be >= 1")


STAGE_CLASSES = {StageKind.CORPUS: CorpusStage, StageKind.TOKENIZER: TokenizerStage, StageKind.SHARDS: ShardsStage,
                 StageKind.TRAIN: TrainStage, StageKind.DISTILL: TrainStage, StageKind.UPCYCLE: UpcycleStage,
                 StageKind.EVAL: EvalStage, StageKind.SYNTH: SynthStage, StageKind.SFT: SFTStage,
                 StageKind.RL: RLStage, StageKind.TASKS: TasksStage, StageKind.PACKAGE: PackageStage,
                 StageKind.VISION: VisionStage}

Stage = (CorpusStage | TokenizerStage | ShardsStage | TrainStage | UpcycleStage | EvalStage | SynthStage | SFTStage
         | RLStage | TasksStage | PackageStage | VisionStage)


@dataclasses.dataclass(kw_only=True)
class Recipe:
    run_dir: str
    seed: int = 0
    stages: list[Any]
    source: str = "recipe"       # where it was read from (a YAML path), for provenance

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise ConfigError(f"no stage named {name!r}; stages: {[s.name for s in self.stages]}")

    def stage_dir(self, name: str) -> Path:
        return Path(self.run_dir) / "stages" / name


def parse_stage(data: Any, index: int) -> Stage:
    if not isinstance(data, dict):
        raise ConfigError(f"stages.{index}: a stage is a mapping with name and kind, got {data!r}")
    data = dict(data)
    if "from" in data:
        data["from_"] = data.pop("from")
    name = data.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"stages.{index}: name={name!r} must be a non-empty string without '/'")
    try:
        kind = StageKind(data.get("kind"))
    except ValueError:
        raise ConfigError(f"stage {name!r}: unknown kind {data.get('kind')!r}; accepted: "
                          f"{[k.value for k in StageKind]}") from None
    return cfg.from_dict(STAGE_CLASSES[kind], data, f"stage {name!r}")


def _check_ref(recipe: Recipe, stage: Stage, key: str, ref: str, kinds: tuple[StageKind, ...], seen: dict) -> None:
    if ref not in seen:
        later = ref in {s.name for s in recipe.stages}
        raise ConfigError(f"stage {stage.name!r}: {key}={ref!r} names " + (
            "a later stage; a stage can only use the stages before it" if later else
            f"no stage; earlier stages: {list(seen)}"))
    if seen[ref] not in kinds:
        raise ConfigError(f"stage {stage.name!r}: {key}={ref!r} is a {seen[ref].value} stage; {key} needs one of "
                          f"kind {[k.value for k in kinds]}")


def validate(recipe: Recipe) -> None:
    """Names unique, every reference names an earlier stage of a fitting kind, train configs well-formed."""
    seen: dict[str, StageKind] = {}
    for s in recipe.stages:
        if s.name in seen:
            raise ConfigError(f"stage name {s.name!r} is used twice")
        if isinstance(s, TokenizerStage):
            _check_ref(recipe, s, "corpus", s.corpus, (StageKind.CORPUS,), seen)
        elif isinstance(s, ShardsStage):
            _check_ref(recipe, s, "corpus", s.corpus, (StageKind.CORPUS,), seen)
            _check_ref(recipe, s, "tokenizer", s.tokenizer, (StageKind.TOKENIZER,), seen)
        elif isinstance(s, UpcycleStage):
            _check_ref(recipe, s, "from", s.from_, MODEL_KINDS, seen)
        elif isinstance(s, TrainStage):
            if s.from_ is not None:
                _check_ref(recipe, s, "from", s.from_, MODEL_KINDS, seen)
            if s.teacher is not None:
                _check_ref(recipe, s, "teacher", s.teacher, MODEL_KINDS, seen)
            _check_ref(recipe, s, "data.shards", s.data.shards, (StageKind.SHARDS,), seen)
            # build the TrainConfig now so a bad key or value fails before any stage runs
            TrainConfig.from_dict({"model": "-", "run_dir": "-", **s.train})
        elif isinstance(s, EvalStage):
            _check_ref(recipe, s, "shards", s.shards, (StageKind.SHARDS,), seen)
            for m in s.models:
                _check_ref(recipe, s, "models", m, MODEL_KINDS, seen)
        elif isinstance(s, PackageStage):
            _check_ref(recipe, s, "from", s.from_, (StageKind.SFT, StageKind.RL), seen)
            source = recipe.stage(s.from_)
            if isinstance(source, RLStage) and source.trains is not RLTrains.ADAPTER:
                raise ConfigError(f"stage {s.name!r}: from={s.from_!r} trains every weight; a package stage ships an "
                                  f"adapter (give that rl stage trains: adapter)")
            for ref in s.figures:
                _check_ref(recipe, s, "figures", ref, (StageKind.TASKS,), seen)
            if not s.bundle or "/" in s.bundle:
                raise ConfigError(f"stage {s.name!r}: bundle={s.bundle!r} must be a model name without '/'")
        elif isinstance(s, VisionStage) and s.from_ is not None:
            _check_ref(recipe, s, "from", s.from_, (StageKind.VISION,), seen)
        elif isinstance(s, (SynthStage, SFTStage, RLStage, TasksStage)):
            _validate_posttrain(s)
            if getattr(s, "from_", None) is not None:
                adapter = isinstance(s, RLStage) and s.trains is RLTrains.ADAPTER
                _check_ref(recipe, s, "from", s.from_, (StageKind.SFT,) if adapter else MODEL_KINDS, seen)
            for ref in getattr(s, "data", []):
                if not ref.endswith(".jsonl") and not is_builtin(ref):
                    _check_ref(recipe, s, "data", ref, (StageKind.SYNTH,), seen)
            for m in getattr(s, "models", []):
                if not m.startswith(BASE_PREFIX):
                    _check_ref(recipe, s, "models", m, MODEL_KINDS, seen)
        seen[s.name] = s.kind


def recipe_from_dict(data: Any, source: str = "recipe") -> Recipe:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a recipe is a mapping (run_dir, seed, stages), got {type(data).__name__}")
    # keys starting with "x-" hold YAML anchors (shared train / mixture blocks) and are otherwise ignored
    unknown = sorted(k for k in set(data) - {"run_dir", "seed", "stages"} if not str(k).startswith("x-"))
    if unknown:
        raise ConfigError(f"{source}: unknown keys {unknown}; accepted keys: ['run_dir', 'seed', 'stages'] and "
                          f"'x-...' keys holding YAML anchors")
    if "run_dir" not in data or not isinstance(data.get("stages"), list) or not data["stages"]:
        raise ConfigError(f"{source}: needs run_dir and a non-empty list of stages")
    recipe = Recipe(run_dir=str(data["run_dir"]), seed=int(data.get("seed", 0)), source=source,
                    stages=[parse_stage(s, i) for i, s in enumerate(data["stages"])])
    validate(recipe)
    return recipe


def load_recipe(path: str | Path, *, run_dir: str | None = None) -> Recipe:
    """Read and validate a recipe YAML; run_dir overrides the file's."""
    data = read_yaml(path, "recipe")
    if isinstance(data, dict) and run_dir is not None:
        data = {**data, "run_dir": run_dir}
    return recipe_from_dict(data, str(path))


def stage_spec(stage: Stage) -> dict:
    """The stage as plain data (what its done-marker records, to notice a changed recipe)."""
    return cfg.to_dict(stage)
