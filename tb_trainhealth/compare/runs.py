"""Two run directories read, diagnosed and compared: what `tb-trainhealth compare` and
`HealthCallback(baseline=...)` call. A path that is not one training run is a clear error."""

from __future__ import annotations

import os

from tb_trainhealth.compare.comparison import Comparison, compare
from tb_trainhealth.diagnosis import Diagnosis


class RunNotComparable(Exception):
    """A path that cannot be compared: missing, not a run, or a logdir of several runs."""


def compare_directories(run: str, baseline: str) -> Comparison:
    ours, theirs = diagnosed_directory(run, "run"), diagnosed_directory(baseline, "baseline")
    return compare(ours.signals, theirs.signals, ours.findings, theirs.findings, damage(baseline))


def damage(path: str) -> list[str]:
    """What is wrong with the event files of a local run directory (a corrupt record, a cut end), in
    words with the file and offset; [] for a remote path, whose files are not scanned here."""
    from tb_trainhealth.read.event_files import check_logdir
    from tb_trainhealth.run_paths import is_local

    if not is_local(path) or not os.path.isdir(path):
        return []
    return [problem.text() for found in check_logdir(path).values() for problem in found if problem.is_error]


def diagnosed_directory(path: str, role: str) -> Diagnosis:
    """The one training run under `path` (its train/ and validation/ sub-runs included), named by
    `path` as the user wrote it."""
    from tb_trainhealth.diagnosis import diagnose_run
    from tb_trainhealth.read.logdir import LogdirError, loaded_logdir
    from tb_trainhealth.read.reader import SignalReader
    from tb_trainhealth.run_paths import is_local

    try:
        with loaded_logdir(path) as provider:
            reader = SignalReader(provider)
            groups = reader.groups()
            if len(groups) != 1:
                names = ", ".join(sorted(group.name for group in groups)[:5])
                raise RunNotComparable(
                    f"the {role} {path} holds {len(groups)} training runs ({names}); name one of their directories"
                )
            diagnosis = diagnose_run(reader, groups[0])
    except LogdirError as err:
        broken = damage(path)
        if broken:  # event files there, none of them readable: say which and why, not "no event files"
            raise RunNotComparable(
                f"the {role} {path} has event files, but none is a readable event file: {'; '.join(broken[:3])}"
            ) from err
        raise RunNotComparable(f"the {role} is not a readable run: {err}") from err
    if diagnosis.errors and not diagnosis.signals.series:
        raise RunNotComparable(f"the {role} {path} cannot be read: {diagnosis.errors[0]}")
    # (a URL keeps its "//": normpath would make s3://bucket/run "s3:/bucket/run")
    name = os.path.normpath(path) if is_local(path) else path.rstrip("/")
    diagnosis.signals.run = name
    return diagnosis
