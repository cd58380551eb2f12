"""tf.data lint at train start: pipelines built in a known-slow or known-wrong way.

Reads the dataset's own serialized graph once (op types are TensorFlow's stable
op names; map functions come with the graph's function library) and returns plain
events; the read-side rule `input_pipeline_config` turns them into findings with
the exact change to make. Advice follows TensorFlow's "Better performance with
the tf.data API" guide (prefetch, parallel map/interleave, cache placement,
vectorized maps) and the `Dataset.shuffle` docs (shuffle elements, not batches;
a buffer as large as the dataset shuffles it perfectly).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from tb_trainhealth.callback.frameworks.keras_private import adapter_dataset
from tb_trainhealth.callback.frameworks.tf_private import dataset_inputs, dataset_tensors, serialized_graph
from tb_trainhealth.contract.events import PipelineLintEvent
from tb_trainhealth.contract.run_info import InputSource
from tb_trainhealth.contract.vocab import PipelineCheck

# Above this many bytes held in memory by the pipeline's sources, the lint is skipped:
# serializing the graph would copy them (time and memory at train start, and protobuf's
# 2 GiB limit).
MAX_LINTED_BYTES = 64 * 2**20
# Wrappers tf.data and Keras put around a pipeline; they say nothing about its shape.
_TRANSPARENT = {
    "OptionsDataset",
    "ModelDataset",
    "MaxIntraOpParallelismDataset",
    "PrivateThreadPoolDataset",
    "AssertNextDataset",
    "AssertCardinalityDataset",
    "AutoShardDataset",
    "RebatchDataset",
    "RebatchDatasetV2",
}
_PREFETCH = {"PrefetchDataset"}
_SEQUENTIAL_MAP = {"MapDataset": "map", "InterleaveDataset": "interleave", "FlatMapDataset": None}
_PARALLEL_MAP = {"ParallelMapDataset", "ParallelMapDatasetV2", "MapAndBatchDataset"}
_ANY_MAP = {"MapDataset", "ParallelMapDataset", "ParallelMapDatasetV2"}
_CACHE = {"CacheDataset", "CacheDatasetV2"}
_SHUFFLE = {
    "ShuffleDataset",
    "ShuffleDatasetV2",
    "ShuffleDatasetV3",
    "ShuffleAndRepeatDataset",
    "ShuffleAndRepeatDatasetV2",
}
_BATCH = {"BatchDataset", "BatchDatasetV2", "PaddedBatchDataset", "PaddedBatchDatasetV2", "MapAndBatchDataset"}
# Ops that keep one output element per input element (so the source's count carries through).
_ONE_TO_ONE = _ANY_MAP | _CACHE | _PREFETCH | _TRANSPARENT

# Inside a map function: ops that make it random (augmentation)...
_RANDOM_MARKERS = ("Random", "Multinomial", "RandomShuffle")
# ...ops that make it expensive (decoding, file reads, parsing, Python)...
_EXPENSIVE_OPS = {
    "DecodeJpeg", "DecodePng", "DecodeImage", "DecodeBmp", "DecodeGif", "DecodeAndCropJpeg", "DecodeWav",
    "DecodeRaw", "DecodeCSV", "DecodeCompressed", "DecodeProtoV2", "ReadFile", "ParseExample", "ParseExampleV2",
    "ParseSingleExample", "ParseSequenceExample", "ParseSequenceExampleV2", "ParseSingleSequenceExample",
    "PyFunc", "EagerPyFunc", "PyFuncStateless", "ResizeBilinear", "ResizeBicubic", "ResizeArea",
    "ResizeNearestNeighbor", "ScaleAndTranslate",
}  # fmt: skip
# ...and ops cheap and element-wise enough that the same function works on a whole batch.
_VECTORIZABLE_OPS = {
    "Const", "Identity", "IdentityN", "NoOp", "Cast", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "DivNoNan",
    "Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Maximum", "Minimum", "ClipByValue", "Abs", "Tanh",
    "Sigmoid", "Relu", "OneHot", "Less", "Greater", "LessEqual", "GreaterEqual", "Equal", "Select", "SelectV2",
}  # fmt: skip
# The map Keras itself adds for fit(class_weight=...), followed by its own prefetch.
_KERAS_OWN_MAP = "class_weights_map_fn"
# Shuffle buffers below this share of the elements shuffle only locally.
SMALL_SHUFFLE_FRACTION = 0.1


@dataclasses.dataclass(frozen=True)
class Stage:
    op: str
    name: str
    function_ops: frozenset[str]  # every op in its function(s), nested functions included
    constants: tuple[Any, ...]  # its non-dataset inputs where they are constants (else None)
    elements: int | None  # source stages: how many elements, when known

    @property
    def is_random(self) -> bool:
        return any(marker in op for op in self.function_ops for marker in _RANDOM_MARKERS)

    @property
    def is_expensive(self) -> bool:
        return bool(self.function_ops & _EXPENSIVE_OPS)


def _clean(input_name: str) -> str:
    return input_name.lstrip("^").split(":")[0]


def _scalar_constant(node: Any) -> Any:
    """The value of a scalar numeric Const node (buffer sizes, parallelism); else None."""
    tensor = node.attr["value"].tensor
    if node.op != "Const" or tensor.tensor_shape.dim:
        return None
    try:
        return tf.make_ndarray(tensor).item()
    except (KeyError, TypeError, ValueError):  # resources, variants, strings
        return None


def _function_ops(graph: graph_pb2.GraphDef, name: str, seen: set[str]) -> set[str]:
    if name in seen:
        return set()
    seen.add(name)
    functions = {f.signature.name: f for f in graph.library.function}
    function = functions.get(name)
    if function is None:
        return set()
    ops = set()
    for node in function.node_def:
        ops.add(node.op)
        if node.op in functions:
            ops |= _function_ops(graph, node.op, seen)
        for value in node.attr.values():
            if value.func.name:
                ops |= _function_ops(graph, value.func.name, seen)
    return ops


def pipeline_stages(dataset: tf.data.Dataset) -> list[Stage]:
    """The dataset's chain of stages from its source to its last op (first input of each)."""
    graph = graph_pb2.GraphDef.FromString(serialized_graph(dataset))
    nodes = {node.name: node for node in graph.node}
    datasets = {name for name, node in nodes.items() if node.op.endswith("Dataset") or "Dataset" in node.op}
    # The pipeline's last dataset op feeds the graph's return value.
    sinks = [_clean(node.input[0]) for node in graph.node if node.op == "_Retval" and node.input]
    if len(sinks) != 1 or sinks[0] not in datasets:
        return []
    chain: list[Stage] = []
    name: str | None = sinks[0]
    while name is not None:
        node = nodes[name]
        inputs = [_clean(i) for i in node.input if not i.startswith("^")]
        upstream = next((i for i in inputs if i in datasets), None)
        constants = tuple(_scalar_constant(nodes[i]) for i in inputs if i not in datasets)
        functions = [value.func.name for value in node.attr.values() if value.func.name]
        if any(_KERAS_OWN_MAP in function for function in functions):
            name = upstream  # Keras' own stage (with `class_weight=`), not the user's to change
            continue
        ops: set[str] = set()
        for function in functions:
            ops |= _function_ops(graph, function, set())
        elements = None
        if node.op == "TensorSliceDataset" and inputs:
            shape = nodes[inputs[0]].attr["value"].tensor.tensor_shape if nodes[inputs[0]].op == "Const" else None
            elements = int(shape.dim[0].size) if shape is not None and shape.dim else None
        chain.append(Stage(node.op, name, frozenset(ops), constants, elements))
        name = upstream
    return chain[::-1]


# -- the checks: one function each, (stages) -> list of events ----------------------------


def _last_real_stage(stages: list[Stage]) -> Stage | None:
    real = [s for s in stages if s.op not in _TRANSPARENT]
    return real[-1] if real else None


def check_no_prefetch(stages: list[Stage]) -> list[PipelineLintEvent]:
    last = _last_real_stage(stages)
    if last is None or last.op in _PREFETCH:
        return []
    return [PipelineLintEvent(0, PipelineCheck.NO_PREFETCH, stage=last.op)]


def check_sequential_map(stages: list[Stage]) -> list[PipelineLintEvent]:
    events = []
    for stage in stages:
        method = _SEQUENTIAL_MAP.get(stage.op)
        parallel_one = stage.op in _PARALLEL_MAP and stage.constants and stage.constants[-1] == 1
        if method or parallel_one:
            events.append(PipelineLintEvent(0, PipelineCheck.SEQUENTIAL_MAP, stage=stage.op, method=method or "map"))
    return events


def check_cache_after_augmentation(stages: list[Stage]) -> list[PipelineLintEvent]:
    for index, stage in enumerate(stages):
        if stage.op in _CACHE and any(s.op in _ANY_MAP and s.is_random for s in stages[:index]):
            return [PipelineLintEvent(0, PipelineCheck.CACHE_AFTER_AUGMENTATION, stage=stage.op)]
    return []


def check_expensive_map_not_cached(stages: list[Stage]) -> list[PipelineLintEvent]:
    for index, stage in enumerate(stages):
        cached_later = any(s.op in _CACHE for s in stages[index + 1 :])
        if (
            stage.op in _ANY_MAP | {"MapAndBatchDataset"}
            and stage.is_expensive
            and not stage.is_random
            and not cached_later
        ):
            ops = tuple(sorted(stage.function_ops & _EXPENSIVE_OPS))
            return [PipelineLintEvent(0, PipelineCheck.EXPENSIVE_MAP_NOT_CACHED, stage=stage.op, ops=ops)]
    return []


def check_shuffle_order(stages: list[Stage]) -> list[PipelineLintEvent]:
    events = []
    first_batch = next((i for i, s in enumerate(stages) if s.op in _BATCH), None)
    shuffled_elements = any(s.op in _SHUFFLE for s in stages[: first_batch or 0])
    for index, stage in enumerate(stages):
        if stage.op not in _SHUFFLE:
            continue
        if first_batch is not None and index > first_batch and not shuffled_elements:
            events.append(PipelineLintEvent(0, PipelineCheck.SHUFFLE_AFTER_BATCH, stage=stage.op))
            continue
        elements = _elements_before(stages, index)
        buffer_size = stage.constants[0] if stage.constants else None
        if elements and isinstance(buffer_size, int) and 0 < buffer_size < SMALL_SHUFFLE_FRACTION * elements:
            events.append(
                PipelineLintEvent(
                    0, PipelineCheck.SMALL_SHUFFLE_BUFFER, stage=stage.op, buffer_size=buffer_size, elements=elements
                )
            )
    return events


def _elements_before(stages: list[Stage], index: int) -> int | None:
    """Element count flowing into stage `index`, when it is the source's count."""
    for stage in stages[:index][::-1]:
        if stage.elements is not None:
            return stage.elements
        if stage.op not in _ONE_TO_ONE:
            return None
    return None


def check_per_element_map(stages: list[Stage]) -> list[PipelineLintEvent]:
    first_batch = next((i for i, s in enumerate(stages) if s.op in _BATCH), None)
    if first_batch is None:
        return []
    for stage in stages[:first_batch]:
        if stage.op in _ANY_MAP and stage.function_ops and stage.function_ops <= _VECTORIZABLE_OPS:
            return [PipelineLintEvent(0, PipelineCheck.PER_ELEMENT_MAP, stage=stage.op)]
    return []


CHECKS = (
    check_no_prefetch,
    check_sequential_map,
    check_cache_after_augmentation,
    check_expensive_map_not_cached,
    check_shuffle_order,
    check_per_element_map,
)


def in_memory_bytes(dataset: tf.data.Dataset) -> int:
    """Bytes of the tensors held by from_tensors/from_tensor_slices sources upstream: the
    serialized graph would copy them all (a numpy training set of GBs)."""
    total, todo, seen = 0, [dataset], set()
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for tensor in dataset_tensors(current):
            if tf.is_tensor(tensor) and tensor.shape.num_elements() is not None:
                total += tensor.shape.num_elements() * tensor.dtype.size
        todo.extend(dataset_inputs(current))
    return total


def lint_dataset(dataset: tf.data.Dataset) -> list[PipelineLintEvent]:
    if in_memory_bytes(dataset) > MAX_LINTED_BYTES:
        return []
    stages = pipeline_stages(dataset)
    return [event for check in CHECKS for event in check(stages)]


# -- which data is this fit() training on? -------------------------------------------------

_INPUT_TYPES = {
    "TFDatasetAdapter": "tf.data",
    "ArrayDataAdapter": "arrays",
    "PyDatasetAdapter": "PyDataset",
    "GeneratorDataAdapter": "generator",
    "GrainDatasetAdapter": "grain",
    "TorchDataLoaderAdapter": "torch DataLoader",
    # tf_keras' adapters
    "DatasetAdapter": "tf.data",
    "TensorLikeDataAdapter": "arrays",
    "GenericArrayLikeDataAdapter": "arrays",
    "KerasSequenceAdapter": "PyDataset",
}


def describe_input(adapter: Any) -> InputSource:
    """Input type (and PyDataset worker settings) for run_info and the input_bound fixes."""
    kind = _INPUT_TYPES.get(type(adapter).__name__, type(adapter).__name__)
    py_dataset = getattr(adapter, "py_dataset", None)
    if py_dataset is None:
        return InputSource(kind)
    workers = int(getattr(py_dataset, "workers", 1) or 0)
    return InputSource(kind, workers, bool(getattr(py_dataset, "use_multiprocessing", False)))


def user_dataset(adapter: Any) -> tf.data.Dataset | None:
    """The tf.data pipeline the user built (not the one Keras builds around arrays)."""
    if _INPUT_TYPES.get(type(adapter).__name__) != "tf.data":
        return None
    dataset = adapter_dataset(adapter)
    return dataset if isinstance(dataset, tf.data.Dataset) else None
