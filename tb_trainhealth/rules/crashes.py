"""`training_crash` and `oom`: findings from crash and OOM events recorded by the callback.

The write side records what happened (exception type, message, step, batch sizes);
the category and the fixes are derived here, on the read side, so older logs get
better advice when the rules improve.
"""

from __future__ import annotations

import re

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import BatchSizeEvent, CrashEvent, OomEvent
from tb_trainhealth.findings import ADD_CLIPPING, LOWER_RATE, Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.signals import RunSignals

SHAPE_MISMATCH = "shape mismatch"
DTYPE = "dtype"
DATA_LOADING = "data loading"
LABELS = "labels out of range"
OUT_OF_MEMORY = "out of memory"
NONFINITE_CHECK = "non-finite check"
OTHER = "other"

# Checked in order; the first category whose type or message pattern matches wins.
_CATEGORY_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    (
        OUT_OF_MEMORY,
        ("ResourceExhaustedError", "MemoryError"),
        re.compile(r"\bOOM\b|out of memory|ResourceExhausted", re.I),
    ),
    (NONFINITE_CHECK, (), re.compile(r"(Tensor had (NaN|Inf) values|check_numerics|CheckNumerics)", re.I)),
    (
        DATA_LOADING,
        ("NotFoundError", "DataLossError", "FileNotFoundError", "PermissionDeniedError"),
        re.compile(
            r"No such file|Failed to open|could not find|corrupted record|truncated record|DataLoss|"
            r"Invalid JPEG|Invalid PNG|Unknown image file format|decode_(jpeg|png|image)|DecodeJpeg|DecodePng|"
            r"Error in user-defined function passed to|IteratorGetNext|TFRecord",
            re.I,
        ),
    ),
    (
        LABELS,
        (),
        re.compile(
            r"label value of -?\d+ which is outside the valid range|labels? .* out of (the )?(valid )?range", re.I
        ),
    ),
    (
        SHAPE_MISMATCH,
        (),
        re.compile(
            r"Incompatible shapes|shapes? .* (are )?incompatible|must have the same (rank|shape)|"
            r"Dimensions must be equal|expected (axis|shape|ndim|min_ndim)|expected .* to have shape|"
            r"logits and labels must have the same|must have rank|Shapes .* and .* are incompatible|"
            r"ndim=\d+, found ndim=\d+|size of the data|cannot reshape|Input to reshape",
            re.I,
        ),
    ),
    (
        DTYPE,
        (),
        re.compile(
            r"dtype|DataType|could not convert string to float|Cannot convert .* to EagerTensor|cast string", re.I
        ),
    ),
)

_SHAPE = re.compile(r"\((?:None|\d+)(?:,\s*(?:None|\d+))*,?\)|\[(?:\?|None|\d+)(?:,\s*(?:\?|None|\d+))*\]")
_FILE = re.compile(
    r"([\w./\\~-]+\.\w{1,8});? (?:No such file|not found)"
    r"|(?:No such file or directory|Failed to open|could not find)[^\n]*?([\w./\\~-]+\.\w{1,8})",
    re.I,
)
_OP = re.compile(r"(?:\bnode|\bNode:|\bop)\s+'?([A-Za-z0-9_/.-]+)'?|\[Op:([A-Za-z0-9_]+)\]", re.I)
# Eager TensorFlow errors wrap the message: "{{function_node __wrapped__...}} <message> [Op:X] name: ".
_WRAPPER = re.compile(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:[^\]]*\](?: name: \S*)?")


_TARGET_OUTPUT = re.compile(r"target\.shape=(\([^)]*\)), output\.shape=(\([^)]*\))")
_UNEQUAL_DIMS = re.compile(r"Dimensions must be equal, but are (\d+) and (\d+)")

SPARSE_FOR_IDS = Fix(
    "The labels are class ids: use the sparse loss (or one-hot encode the labels).",
    "loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # y like [3, 0, 2]\n"
    "# or: y = keras.utils.to_categorical(y, num_classes)",
)
CATEGORICAL_FOR_ONE_HOT = Fix(
    "The labels are one-hot rows: use the categorical loss (or turn them into class ids).",
    "loss = keras.losses.CategoricalCrossentropy(from_logits=True)\n# or: y = np.argmax(y, axis=-1)",
)
FLATTEN_FIX = Fix(
    "Flatten (or pool) the feature maps before the Dense head: a Dense layer on a 4-D tensor keeps the "
    "spatial axes, so the model outputs one prediction per pixel.",
    "keras.layers.GlobalAveragePooling2D()  # or keras.layers.Flatten(), before the last Dense layers",
)
RETURN_SEQUENCES_FIX = Fix(
    "The output still has a time axis: return_sequences=True on the last recurrent layer gives one output per "
    "time step. Leave it off for one output per sequence (or pool over time after a Conv1D).",
    "keras.layers.LSTM(64)  # return_sequences=False before the Dense classifier",
)


def _rank(shape: str) -> int:
    return len([part for part in shape.strip("()").split(",") if part.strip()])


def _shape_cause(message: str) -> tuple[str, tuple[Fix, ...]] | None:
    """The likely mistake behind Keras' loss shape errors, with the shapes quoted."""
    match = _TARGET_OUTPUT.search(message)
    if match:
        target, output = match.groups()
        quoted = f"labels {target} vs model output {output}"
        if _rank(output) >= 4:
            return f"a missing Flatten/pooling before the Dense head ({quoted})", (FLATTEN_FIX,)
        if _rank(output) == 3 and _rank(target) <= 2:
            return f"return_sequences left on, or no pooling over time ({quoted})", (RETURN_SEQUENCES_FIX,)
        if "target.ndim - 1" in message and _rank(target) == _rank(output):
            return f"one-hot labels with a sparse loss ({quoted})", (CATEGORICAL_FOR_ONE_HOT,)
        if "same rank" in message and _rank(target) < _rank(output):
            return f"class-id labels with categorical_crossentropy ({quoted})", (SPARSE_FOR_IDS,)
    match = _UNEQUAL_DIMS.search(message)
    if match:
        first, second = match.groups()
        return (
            f"the last layer's width does not match the labels' ({first} vs {second})",
            (
                Fix(
                    "Give the last layer as many units as the labels have columns (one per target or class).",
                    "keras.layers.Dense(y_train.shape[-1])",
                ),
            ),
        )
    return None


def classify(error_type: str, message: str) -> str:
    for category, types, pattern in _CATEGORY_PATTERNS:
        if error_type in types or pattern.search(message):
            return category
    return OTHER


def _fixes(category: str, message: str) -> tuple[Fix, ...]:
    shapes = _SHAPE.findall(message)[:2]
    if category == SHAPE_MISMATCH:
        quoted = f" (shapes in the message: {' vs '.join(shapes)})" if shapes else ""
        cause = _shape_cause(message)
        return (cause[1] if cause else ()) + (
            Fix(
                f"Compare the model's output shape with the labels' shape{quoted}.",
                "print(model.output_shape, y_train.shape)",
            ),
            Fix(
                "Integer class labels need a sparse loss; one-hot labels need the categorical one.",
                "loss = keras.losses.SparseCategoricalCrossentropy()  # y like [3, 0, 2]\n"
                "loss = keras.losses.CategoricalCrossentropy()        # y like [[0, 0, 0, 1], ...]",
            ),
            Fix(
                "Flatten feature maps before Dense layers, or add the missing axis to the data.",
                "keras.layers.Flatten()  # or GlobalAveragePooling2D(); x = tf.expand_dims(x, -1)",
            ),
            Fix(
                "For sequence models, return_sequences=True on the last recurrent layer gives one output per "
                "time step; leave it off for one output per sequence.",
                "keras.layers.LSTM(64)  # return_sequences=False before a Dense classifier",
            ),
        )
    if category == LABELS:
        return (
            Fix(
                "A label is outside the class ids the last layer has (0..units-1): give it one unit per class, "
                "or map the labels to 0..K-1.",
                "classes, y = np.unique(y, return_inverse=True)\nkeras.layers.Dense(len(classes))",
            ),
        )
    if category == DTYPE:
        return (
            Fix(
                "Cast inputs and labels to the dtypes the model expects.",
                "x = x.astype('float32'); y = y.astype('int32')",
            ),
            Fix(
                "Look for strings or objects in the data (e.g. a CSV column read as text).",
                "print(df.dtypes); df = df.apply(pd.to_numeric, errors='coerce')",
            ),
        )
    if category == DATA_LOADING:
        files = [name for match in _FILE.findall(message) for name in match if name]
        where = f" ({files[0]})" if files else ""
        return (
            Fix(
                f"Check that every file the pipeline reads exists and is readable{where}.",
                "assert all(tf.io.gfile.exists(p) for p in paths)",
            ),
            Fix(
                "Skip records that fail to decode instead of crashing (then count how many were skipped).",
                "ds = ds.ignore_errors()  # after the map that decodes",
            ),
            Fix(
                "Validate TFRecord files once before training.",
                "for _ in tf.data.TFRecordDataset(path): pass  # raises DataLossError on a corrupt file",
            ),
        )
    if category == OUT_OF_MEMORY:
        return OOM_FIXES
    if category == NONFINITE_CHECK:
        return (
            Fix("A check_numerics / TerminateOnNaN guard fired: see the nonfinite finding for where it started."),
            Fix(
                "Lower the learning rate and clip gradients.",
                "keras.optimizers.Adam(learning_rate=1e-4, clipnorm=1.0)",
                (LOWER_RATE, ADD_CLIPPING),
            ),
        )
    return (Fix("Read the full traceback in the training log; the message below is where it ended."),)


OOM_FIXES = (
    Fix(
        "Use a smaller batch size, or let tb_trainhealth.fit halve it automatically on OOM.",
        "history = tb_trainhealth.fit(model, x, y, log_dir='logs/run1', batch_size=256, epochs=10)",
    ),
    Fix(
        "Use mixed precision: activations take half the memory on GPUs.",
        "keras.mixed_precision.set_global_policy('mixed_float16')",
    ),
    Fix(
        "Accumulate gradients over several small batches to keep the effective batch size.",
        "keras.optimizers.Adam(learning_rate=1e-3, gradient_accumulation_steps=4)",
    ),
    Fix(
        "Let TensorFlow allocate GPU memory as needed instead of all at once (call before any op).",
        "for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)",
    ),
)


def _summary_line(message: str) -> str:
    """The line of a TensorFlow error that says what went wrong: the last one that is not a
    stack frame, a node annotation or the generic "Graph execution error" header."""
    lines = [
        line.strip()
        for line in _WRAPPER.sub("", message).splitlines()
        if line.strip() and not line.strip().startswith(("File ", "[[", "Detected at node", "Graph execution error"))
    ]
    return lines[-1][:300] if lines else ""


def check_training_crash(run: RunSignals) -> list[Finding]:
    crashes = run.events_of(CrashEvent)
    if not crashes:
        return []
    crash = crashes[-1]  # the one that ended the run (earlier ones were retried)
    error_type, message = crash.error_type, crash.message
    category = classify(error_type, message)
    if category == OUT_OF_MEMORY and run.events_of(OomEvent):
        return []  # the oom rule tells the whole story, retries included
    where = f" in {crash.phase}" if crash.phase else ""
    first_line = _summary_line(message) or error_type
    # The op that failed: a graph node when the message names one, else the eager op.
    ops = [node or eager for node, eager in _OP.findall(_WRAPPER.sub(" ", message))] or [
        eager for _, eager in _OP.findall(message) if eager
    ]
    detail = f"{error_type} at step {crash.step}{where}: {first_line}"
    if ops:
        detail += f" (op: {ops[0]})"
    cause = _shape_cause(message) if category == SHAPE_MISMATCH else None
    if cause:
        detail += f". Likely cause: {cause[0]}."
    return [
        Finding(
            code=Code.TRAINING_CRASH,
            severity=Severity.CRITICAL,
            step=crash.step,
            title=f"Training crashed at step {crash.step}: {category}",
            detail=detail,
            evidence=Evidence(
                (),
                crash.step,
                crash.step,
                facts=fact("exception", error_type)
                + fact("phase", crash.phase)
                + fact("epoch", crash.epoch)
                + fact("op", ops[0] if ops else None)
                + fact("message", first_line),
            ),
            fixes=_fixes(category, message),
        )
    ]


def _memory_in_use(run: RunSignals, event: OomEvent) -> str:
    """The memory in use at an OOM, as the finding's chart shows it: the chart's last reading
    before the error (else its first one after), not the reading taken after the failed step
    freed its buffers ("636 MB in use" was said under a chart of 680-705 MB). Without a chart,
    the reading the event recorded."""
    series = run.get(sig.DEVICE_MEMORY_MB) or run.get(sig.HOST_MEMORY_MB)
    if series is not None and len(series):
        before = np.flatnonzero(series.steps < event.step)
        at = int(before[-1]) if len(before) else 0
        where = "the last reading before it" if len(before) else "the first reading after it"
        return f"; {series.values[at]:.0f} MB in use at step {int(series.steps[at])} ({where})"
    return f"; {event.memory_mb:.0f} MB in use" if event.memory_mb is not None else ""


def _oom_facts(run: RunSignals, ooms: list[OomEvent], grown: list[BatchSizeEvent]) -> tuple[Fact, ...]:
    """One line per attempt: its batch size, where it failed, the memory in use, what came next;
    and one per batch size grown back."""
    out: tuple[Fact, ...] = ()
    for k, event in enumerate(ooms, 1):
        where = f"step {event.step}" + (f", epoch {event.epoch}" if event.epoch is not None else "")
        then = f"retried at batch size {event.next_batch_size}" if event.next_batch_size else "gave up"
        out += fact(
            f"attempt {k}: batch size {event.batch_size}",
            f"out of memory at {where}{_memory_in_use(run, event)}; {then}",
        )
    for event in grown:
        out += fact(
            f"grown back at step {event.step}",
            f"batch size {event.previous_batch_size} -> {event.batch_size} from epoch {(event.epoch or 0) + 1}",
        )
    return out


def _memory_series(run: RunSignals) -> tuple[str, ...]:
    return tuple(name for name in (sig.DEVICE_MEMORY_MB, sig.HOST_MEMORY_MB) if run.get(name) is not None)


def _settled(ooms: list[OomEvent], grown: list[BatchSizeEvent]) -> int | None:
    """The batch size the run went on with after its last change (an OOM's retry, a grow-back)."""
    changes = sorted(
        [(e.step, 0, e.next_batch_size) for e in ooms] + [(e.step, 1, e.batch_size) for e in grown],
        key=lambda change: change[:2],
    )
    return changes[-1][2]


def check_oom(run: RunSignals) -> list[Finding]:
    ooms = run.events_of(OomEvent)
    if not ooms:
        return []
    gave_up = [e for e in ooms if e.next_batch_size is None]
    grown = run.events_of(BatchSizeEvent)
    first = ooms[0]
    sizes = " -> ".join(str(e.batch_size) for e in ooms)
    memory = _memory_in_use(run, first)
    if gave_up:
        last = gave_up[-1]
        return [
            Finding(
                code=Code.OOM,
                severity=Severity.CRITICAL,
                step=last.step,
                title=f"Out of memory even at batch size {last.batch_size}: training stopped",
                detail=f"Out-of-memory at batch sizes {sizes}; the smallest allowed batch size still did not fit{memory}.",
                evidence=Evidence(_memory_series(run), first.step, last.step, facts=_oom_facts(run, ooms, grown)),
                fixes=OOM_FIXES[1:] + OOM_FIXES[:1],
            )
        ]
    final = _settled(ooms, grown)
    grew = (
        f" After steps that fit, it grew back {len(grown)} time(s) ("
        + ", ".join(f"{e.previous_batch_size} -> {e.batch_size}" for e in grown)
        + f") and settled on batch size {final}."
        if grown
        else ""
    )
    return [
        Finding(
            code=Code.OOM,
            severity=Severity.WARNING,
            step=first.step,
            title=f"Out of memory at batch size {first.batch_size}; training continued at {final}",
            detail=(
                f"{len(ooms)} out-of-memory error(s) (batch sizes {sizes}); training resumed at batch size {final} "
                f"from the epoch that failed{memory}.{grew} Smaller batches change the optimisation: consider a lower "
                "learning rate."
            ),
            evidence=Evidence(
                _memory_series(run),
                first.step,
                max(e.step for e in [*ooms, *grown]),
                facts=_oom_facts(run, ooms, grown),
            ),
            fixes=OOM_FIXES,
        )
    ]
