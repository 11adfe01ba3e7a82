"""The algorithm catalog: one entry per algorithm, holding everything relreason knows about it.

An algorithm is declared once, next to its implementation, with `register` (imported as
`relreason.data.algorithms.register`, which also loads the built-in algorithms):

    @register(
        "bellman_ford",
        family="graphs",                              # the CLRS-30 class, also a task group
        inputs="pos N sc, s N m1, A E sc, adj E m",   # the spec, in the mini-language of relreason.data.specs
        outputs="pi N ptr",
        hints="pi_h N ptr, d N sc, msk N m",
        sample=samplers.graph_sampler(0.5, weighted=True, source=True),
        text=TextForm(train_lengths=CLRS_TEXT_LENGTHS, val_stop=33),
        groups=("core8",),                            # task groups beyond the family
    )
    def bellman_ford(A, s): ...

and optionally `classes` (the class count of each categorical), `eval_multiplier`, `min_size` and
`stream` (`StreamForm`). The function runs a lockstep batch: every input carries a leading batch axis,
its probes are recorded with a `relreason.data.probes.Recorder` (checked against the spec), and it
returns a `Dataset`.

Everything else reads the entries through `ALGORITHMS` or the views below (`ALGORITHM_INFO`, `SPECS`,
`live_names`, `algorithm_groups`), which are computed at each access: an algorithm registered after
relreason was imported (a plugin's) is seen by generation, training, evaluation, task groups,
ablations, `relreason list` and CLRS-Text, with no other edit.
"""

from __future__ import annotations

import re
from collections.abc import KeysView
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, TypeVar

from relreason.data.samplers import SampleFn
from relreason.data.specs import CANONICAL_SPLITS, Feature, SplitInfo, Spec, Stage, Type, parse_spec
from relreason.errors import RelreasonError
from relreason.registry import Registry

# The reference generator's training lengths (clrs/_src/clrs_text/generate_clrs_text.py); each
# algorithm's `TextForm.train_lengths` is a prefix of them.
CLRS_TEXT_LENGTHS = (4, 5, 10, 11, 12, 15, 19, 23, 28, 31)

BENCHMARK_GROUP = "clrs30"  # the group of the built-in algorithms (see `algorithm_groups`)
BUILTIN_PACKAGE = "relreason.data.algorithms"  # the built-in algorithms are registered by its modules
_NAME = re.compile(r"[a-z][a-z0-9_]*")  # algorithm, family and group names: snake_case, as task names


@dataclass(frozen=True)
class TextForm:
    """How an algorithm reads as CLRS-Text (`relreason.data.text`): the reference's per-algorithm choices
    (google-deepmind/clrs `clrs/_src/clrs_text/`). The defaults are the common case."""

    # With hints, these hint features are the trace, printed under their own names and specs, instead of
    # the `<output>_h` hints printed as their outputs (clrs_utils.py CLRS_STRING_MATCHING_TASKS_OUTPUT_REPLACER
    # and CLRS_SEARCH_TAKS_OUTPUT_REPLACER); empty: the `<output>_h` hints.
    trace: tuple[str, ...] = ()
    # With hints, the final answer is the trace's last step, not the outputs (the search tasks of
    # CLRS_SEARCH_TAKS_OUTPUT_REPLACER; the string matchers keep printing their output).
    answer_from_trace: bool = False
    # With hints, each trace step, the names asked for and the final answer print as "(a, b)"
    # (clrs_utils.py CLRS_PARENTHESES_TRACES).
    parenthesized: bool = False
    # Scalar inputs the reference's sampler draws as integer arrays, so they print as "3", not "3.0":
    # unweighted ER graphs (`binomial`) and task deadlines (`randint + 1`); SCC's community graph is built
    # in a float matrix and prints "1.0". (Storage keeps every scalar as float64.)
    integer_inputs: frozenset[str] = frozenset()
    # The `clrs_text` preset's training lengths (generate_clrs_text.py, per algorithm: a prefix of
    # CLRS_TEXT_LENGTHS); None: the algorithm is not in that generator, and the preset refuses it.
    train_lengths: tuple[int, ...] | None = None
    # The `clrs_text` preset's validation lengths run from 4 to this bound, exclusive (range(4, stop) in
    # generate_clrs_text.py); None as for train_lengths.
    val_stop: int | None = None
    # sample(rng, length, decimals): the sampler as the reference runs it with truncated floats, for a
    # sampler whose draws depend on the truncation (the ConvexHullSampler truncates inside its rejection
    # loop); None: the algorithm's sampler, then the truncation (samplers.truncate).
    truncated_sample: Callable[..., tuple] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "trace", tuple(self.trace))
        object.__setattr__(self, "integer_inputs", frozenset(self.integer_inputs))
        if self.train_lengths is not None:
            object.__setattr__(self, "train_lengths", tuple(self.train_lengths))


@dataclass(frozen=True)
class StreamForm:
    """How the Ibarz et al. (2022) training recipe treats an algorithm (google-deepmind/clrs
    `clrs/examples/run.py`); `relreason.data.stream` and `relreason.models.batch` read it."""

    # The training stream halves its edge probabilities: "a lower connection probability for [these],
    # otherwise trajectories are very long" (run.py create_samplers).
    sparse: bool = False
    # Its `pred_h` hint never changes, so `model.pred_as_input` moves it to an input (run.py
    # PRED_AS_INPUT_ALGOS).
    pred_as_input: bool = False


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one entry per registration
class Algorithm:
    """Everything about one algorithm (see the module docstring)."""

    name: str
    run: Callable  # run(*inputs) -> Dataset (inputs with a batch axis)
    sample: SampleFn  # sample(rng, length) -> one sample's inputs, in the reference's draw order
    min_size: int  # smallest `length` the sampler accepts
    family: str  # the CLRS-30 class ("sorting", "graphs", ...); also a task group
    spec: Spec
    eval_multiplier: int  # val/test sample count = 32 x this (reference num_samples_multiplier)
    text: TextForm | None  # None: the algorithm has no CLRS-Text form (and no text task)
    stream: StreamForm
    groups: tuple[str, ...]  # task groups beyond the family ("core8")
    module: str  # the module that registered it
    metric: str = "clrs"  # its headline score (OUTPUT_METRICS): which outputs it averages, which way is better

    @property
    def klass(self) -> str:
        """The family under the CLRS-30 paper's word ("algorithm class"), as `relreason list` prints it."""
        return self.family

    @property
    def builtin(self) -> bool:
        """Whether relreason itself registers it (one of the benchmark's algorithms), not a plugin."""
        return self.module.rpartition(".")[0] == BUILTIN_PACKAGE

    def features(self, stage: Stage) -> list[Feature]:
        return [f for f in self.spec.values() if f.stage is stage]


ALGORITHMS: Registry[Algorithm] = Registry("algorithm", "relreason list algorithms")


def register(name: str, *, family: str, inputs: str, outputs: str, hints: str, sample: SampleFn,
             classes: Mapping[str, int] | None = None, eval_multiplier: int = 1, min_size: int = 2,
             text: TextForm | None = None, stream: StreamForm = StreamForm(),
             groups: tuple[str, ...] = (), metric: str | None = None) -> Callable:
    """Decorator registering an algorithm function under its CLRS name with all its facts.

    Args:
        family: its CLRS-30 class, also a task group ("graphs").
        inputs, outputs, hints: its features per stage, `"name LOC TYPE, ..."` (relreason.data.specs).
        sample: sample(rng, length) -> one sample's inputs (relreason.data.samplers).
        classes: the class count of every categorical feature, e.g. {"color": 3}.
        eval_multiplier: val/test sample count = 32 x this (the reference's num_samples_multiplier).
        min_size: the smallest size its sampler accepts.
        text: its CLRS-Text form; None: it has none.
        stream: how the Ibarz et al. training recipe treats it.
        groups: task groups it belongs to beyond its family ("core8").
        metric: its headline score, one of OUTPUT_METRICS; None: from its outputs (all scalar: "clrs_mse",
            the mean squared error, lower is better; none scalar: "clrs", accuracy / F1, higher is better).
            Outputs of both kinds cannot be averaged into one score: such an algorithm must say which.

    Raises:
        RelreasonError: a fact that does not hold together (named, with the algorithm).
    """

    def add(fn: Callable) -> Callable:
        entry = _entry(name, fn, family=family, inputs=inputs, outputs=outputs, hints=hints, sample=sample,
                       classes={} if classes is None else classes, eval_multiplier=eval_multiplier,
                       min_size=min_size, text=text, stream=stream, groups=groups, metric=metric)
        ALGORITHMS.register(name, entry)
        return fn

    return add


def _entry(name: str, fn: Callable, *, family, inputs, outputs, hints, sample, classes, eval_multiplier, min_size,
           text, stream, groups, metric=None) -> Algorithm:
    """The validated entry of a registration (one-line errors naming the algorithm)."""

    def bad(problem: str, hint: str) -> RelreasonError:
        return RelreasonError(f"cannot register algorithm {name!r}: {problem}", hint)

    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise bad("its name must be snake_case", "e.g. register(\"my_search\", ...)")
    if not callable(fn) or not callable(sample):
        raise bad("the algorithm and its sampler must be functions", "decorate a function; pass sample=fn(rng, n)")
    if not isinstance(classes, Mapping):
        raise bad(f"classes must map categorical features to class counts, got {classes!r}", "e.g. classes={\"color\": 3}")
    try:
        spec = parse_spec(inputs, outputs, hints, classes)
    except ValueError as e:
        raise bad(str(e), "write each stage as \"name LOC TYPE, ...\" (see relreason.data.specs)") from None
    for what, value, least in (("eval_multiplier", eval_multiplier, 1), ("min_size", min_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise bad(f"{what} must be an integer >= {least}, got {value!r}", f"e.g. {what}=1")
    if text is not None and not isinstance(text, TextForm):
        raise bad(f"text must be a TextForm or None, got {text!r}", "e.g. text=TextForm()")
    if not isinstance(stream, StreamForm):
        raise bad(f"stream must be a StreamForm, got {stream!r}", "e.g. stream=StreamForm(sparse=True)")
    if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
        raise bad(f"groups must be a tuple of group names, got {groups!r}", "e.g. groups=(\"core8\",)")
    headline = _headline_metric(spec, metric)
    if isinstance(headline, tuple):
        raise bad(*headline)
    entry = Algorithm(name, fn, sample, min_size, family, spec, eval_multiplier, text, stream, tuple(groups),
                      getattr(fn, "__module__", ""), headline)
    problem = _spec_problem(entry) or _name_problem(entry)
    if problem:
        raise bad(*problem)
    return entry


# The headline scores an algorithm's outputs can have (relreason.eval.metrics.Scorer computes both): which outputs
# the score averages. The reference averages every output's score, whatever its type; the 30 benchmark
# algorithms have no scalar output, so for them this is the reference's score.
OUTPUT_METRICS = {
    "clrs": "the mean accuracy / F1 of the pointer, mask, mask_one and categorical outputs, higher is better",
    "clrs_mse": "the mean squared error of the scalar outputs, lower is better",
}


def _headline_metric(spec: Spec, declared: str | None) -> str | tuple[str, str]:
    """The algorithm's headline metric, or (problem, hint) when it cannot have the one declared (or none)."""
    outputs = [f for f in spec.values() if f.stage is Stage.OUTPUT]
    scalar = [f.name for f in outputs if f.type is Type.SCALAR]
    other = [f.name for f in outputs if f.type is not Type.SCALAR]
    if declared is None:
        if scalar and other:
            return (f"its outputs mix scalar features ({', '.join(scalar)}: squared error, lower is better) with "
                    f"accuracy-scored ones ({', '.join(other)}: higher is better), which one score cannot average",
                    "say which the headline score is: metric=\"clrs\" (the accuracy-scored outputs) or "
                    "metric=\"clrs_mse\" (the scalar outputs); every output is still scored and shown")
        return "clrs_mse" if scalar else "clrs"
    if declared not in OUTPUT_METRICS:
        return (f"metric {declared!r} is not an output metric", f"one of {', '.join(OUTPUT_METRICS)}")
    if not (scalar if declared == "clrs_mse" else other):
        kind = "scalar outputs" if declared == "clrs_mse" else "accuracy-scored outputs"
        return f"metric {declared!r} averages its {kind}, and it has none", "leave metric out: it follows from the outputs"
    return declared


def _spec_problem(a: Algorithm) -> tuple[str, str] | None:
    """What in the text and stream forms contradicts the spec, if anything: (problem, hint)."""
    names = {stage: {f.name for f in a.features(stage)} for stage in Stage}
    if a.text is not None:
        unknown = sorted(set(a.text.trace) - names[Stage.HINT])
        if unknown:
            return f"its text trace names {unknown}, which are not hints", "name hint features in TextForm.trace"
        if a.text.answer_from_trace and not a.text.trace:
            return "its text answer comes from a trace it does not name", "set TextForm.trace, or drop answer_from_trace"
        unknown = sorted(a.text.integer_inputs - names[Stage.INPUT])
        if unknown:
            return f"its integer text inputs {unknown} are not inputs", "name input features in integer_inputs"
        if (a.text.train_lengths is None) != (a.text.val_stop is None):
            return "its text form has one of train_lengths and val_stop", "give both (the clrs_text preset) or neither"
    if a.stream.pred_as_input and "pred_h" not in names[Stage.HINT]:
        return "pred_as_input needs a pred_h hint", "drop StreamForm(pred_as_input=True)"
    return None


def _name_problem(a: Algorithm) -> tuple[str, str] | None:
    """A clash of the new entry's name, family or groups with the registered names (every algorithm,
    family and group is a task or task group, so no name may mean two of them)."""
    entries = [ALGORITHMS.get(n) for n in ALGORITHMS.names()]
    families = {e.family for e in entries}
    declared = {g for e in entries for g in e.groups}
    algorithms = set(ALGORITHMS.names())
    for group in (a.family, *a.groups):
        if not isinstance(group, str) or not _NAME.fullmatch(group):
            return f"group {group!r} is not a snake_case name", "e.g. family=\"graphs\""
    if a.name in families | declared | {a.family, *a.groups, BENCHMARK_GROUP}:
        return f"{a.name!r} already names a task group", "choose another algorithm name"
    if a.family in algorithms | declared | {BENCHMARK_GROUP} or a.family in a.groups:
        return f"its family {a.family!r} is already an algorithm or a declared group", "choose another family"
    for group in a.groups:
        if group in algorithms | families | {BENCHMARK_GROUP}:
            return f"its group {group!r} is already an algorithm, a family or {BENCHMARK_GROUP}", "choose another group"
    if len(set(a.groups)) != len(a.groups):
        return f"it names a group twice in {a.groups}", "name each group once"
    return None


V = TypeVar("V")


class AlgorithmView(Mapping[str, V]):
    """A read-only mapping over the registered algorithms, computed at each access (so it sees an
    algorithm registered later): name -> pick(entry), leaving out those for which pick gives None."""

    def __init__(self, pick: Callable[[Algorithm], V | None]):
        self._pick = pick

    def __getitem__(self, name: str) -> V:
        value = self._pick(ALGORITHMS.get(name)) if isinstance(name, str) and name in ALGORITHMS else None
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return (name for name, a in ALGORITHMS.items() if self._pick(a) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def live_names(keep: Callable[[Algorithm], bool]) -> KeysView[str]:
    """The names of the registered algorithms for which `keep(entry)` holds, as a live set."""
    return AlgorithmView(lambda a: a if keep(a) else None).keys()


ALGORITHM_INFO: Mapping[str, Algorithm] = AlgorithmView(lambda a: a)  # name -> entry, registration order
SPECS: Mapping[str, Spec] = AlgorithmView(lambda a: a.spec)


def algorithm_groups() -> dict[str, list[str]]:
    """Named groups of the registered algorithms, computed now.

    First each group some algorithm names in `groups=` (in the order they are first named), its members
    by name: the order does not depend on which module or plugin registered first (and is how the RT
    paper lists its eight core tasks, `core8`). Then `clrs30`, the benchmark: the built-in algorithms in
    registration order, the reference's (google-deepmind/clrs specs.py); a plugin's algorithms are never
    in it. Then one group per family, in registration order. The order of a group is the order of its
    tasks in a multi-task run (it seeds each task's data), so it must not change."""
    entries = [ALGORITHMS.get(n) for n in ALGORITHMS.names()]
    declared: dict[str, list[str]] = {}
    for a in entries:
        for g in a.groups:
            declared.setdefault(g, []).append(a.name)
    groups = {g: sorted(members) for g, members in declared.items()}
    groups[BENCHMARK_GROUP] = [a.name for a in entries if a.builtin]
    for a in entries:
        groups.setdefault(a.family, []).append(a.name)
    return groups


def canonical_split(algorithm: str, split: str) -> SplitInfo:
    """The benchmark's (size, seed, num) for `split`, with the algorithm's eval multiplier applied."""
    if split not in CANONICAL_SPLITS:
        raise RelreasonError(f"unknown split {split!r}", "use one of: " + ", ".join(CANONICAL_SPLITS))
    base = CANONICAL_SPLITS[split]
    mult = 1 if split == "train" else ALGORITHMS.get(algorithm).eval_multiplier
    return SplitInfo(base.size, base.seed, base.num * mult)

