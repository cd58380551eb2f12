"""`memory_growth`: host or device memory climbing steadily through training (a leak)."""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series

MIN_SAMPLES = 8
# The first part of a run allocates for good (graph tracing, optimizer slots,
# prefetch buffers): growth is measured after it.
WARMUP_FRACTION = 0.25
# A leak: at least this much growth after warm-up, both in MiB and relative to the level...
MIN_GROWTH_MB = 100.0
MIN_GROWTH_FRACTION = 0.10
# ...and steady: memory keeps rising with the step (Spearman rank correlation), not a
# one-off allocation followed by a flat line.
MIN_RANK_CORRELATION = 0.9
# A leak is a warning where its climb, carried on to the fit's planned end (epochs x steps per
# epoch), reaches what the process may hold (RAM, a container's allowance, an rlimit), with this
# share of it kept free for what else the run allocates. Short of that it is info: a finished
# run that rose 200 MiB to 1.3 GiB on a machine with 24 GiB lost nothing (issue 44's false alarms).
LIMIT_SHARE = 0.9


def _growth(series: Series) -> tuple[float, float, float, int, int] | None:
    series = finite_part(series)
    if len(series) < MIN_SAMPLES:
        return None
    start = int(len(series) * WARMUP_FRACTION)
    steps, values = series.steps[start:], series.values[start:]
    if len(values) < MIN_SAMPLES // 2:
        return None
    first, last = float(np.median(values[:3])), float(np.median(values[-3:]))
    return first, last, rank_correlation(values), int(steps[0]), int(steps[-1])


def _outlook(run: RunSignals, last: float, per_1k: float, end_step: int, limit: float | None) -> tuple[bool, str]:
    """(urgent, what the climb means): urgent where it reaches the limit by the fit's planned end;
    where the limit is unknown (device memory, a platform without it), urgent as it always was."""
    if limit is None:
        return True, "At this rate the run will run out of memory."
    planned = run.info.planned_end_step
    remaining = max((planned if planned is not None else 2 * end_step) - end_step, 0)
    projected = last + per_1k * remaining / 1000
    steps_to_limit = (LIMIT_SHARE * limit - last) / per_1k * 1000 if per_1k > 0 else float("inf")
    if projected >= LIMIT_SHARE * limit:
        return True, (
            f"At this rate it reaches {projected:.0f} MiB by the fit's planned end (step "
            f"{end_step + remaining}), beyond the {limit:.0f} MiB this process may hold: the run will run out of memory."
        )
    return False, (
        f"At this rate it ends near {projected:.0f} MiB of the {limit:.0f} MiB this process may hold, so this run "
        f"is not at risk; it would reach that about {steps_to_limit:.0f} steps after this point. Worth fixing "
        "before a longer run."
    )


def check_memory_growth(run: RunSignals) -> list[Finding]:
    findings = []
    for name, label in ((sig.HOST_MEMORY_MB, "Host memory (RSS)"), (sig.DEVICE_MEMORY_MB, "Device memory")):
        series = run.get(name)
        measured = _growth(series) if series is not None else None
        if measured is None:
            continue
        first, last, correlation, start_step, end_step = measured
        grown = last - first
        if grown < MIN_GROWTH_MB or grown < MIN_GROWTH_FRACTION * first or correlation < MIN_RANK_CORRELATION:
            continue
        per_1k = grown / max(end_step - start_step, 1) * 1000
        limit = run.info.host_memory_limit_mb if name == sig.HOST_MEMORY_MB else None
        urgent, outlook = _outlook(run, last, per_1k, end_step, limit)
        findings.append(
            Finding(
                code="memory_growth",
                severity=Severity.WARNING if urgent else Severity.INFO,
                step=start_step,
                title=f"{label} grows steadily: +{grown:.0f} MiB since step {start_step}",
                detail=(
                    f"{label} rose from {first:.0f} MiB (step {start_step}, after warm-up) to {last:.0f} MiB "
                    f"(step {end_step}), about {per_1k:.0f} MiB per 1000 steps, almost monotonically "
                    f"(rank correlation {correlation:.2f}). {outlook}"
                ),
                evidence=Evidence((name,), start_step, end_step),
                fixes=(
                    Fix(
                        "Don't keep tensors (or losses) from every step in Python lists; keep floats.",
                        "losses.append(float(logs['loss']))  # not the tensor",
                    ),
                    Fix(
                        "Building models in a loop? Free the old graphs between them.",
                        "keras.backend.clear_session(); gc.collect()",
                    ),
                    Fix(
                        "Don't create new tf.function/tf.Variable objects per step (each traces a new graph).",
                        "step_fn = tf.function(step)  # once, outside the loop",
                    ),
                    Fix(
                        "On GPUs, let TensorFlow grow its memory pool instead of reserving it all.",
                        "for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)",
                    ),
                ),
            )
        )
    return findings
