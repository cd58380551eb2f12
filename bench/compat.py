"""Which Python, Keras, TensorFlow and TensorBoard versions each part of tb-trainhealth works on.

Every row is a throwaway venv (kept in the cache directory, so a second run only trains):
every Keras 3 minor the current TensorFlow accepts, tf_keras (legacy Keras 2), each Python
that setup.py's `python_requires` allows and the machine has, and the lowest TensorFlow,
Keras and tf_keras that setup.py allows. Each gets the project (`pip install -e '.[tf]'`) and
its pins; a subprocess trains demo/scenarios.py's healthy_mlp, nan_in_layer (a custom layer
takes the log of ReLU features: -inf, then NaN) and exploding_gradients (SGD at 2.0) with
HealthCallback, and the table says for each part whether it ran:

  layer grads    per-layer gradient norms recorded (health/layer/grad_norm, one column a layer)
  NaN origin     replaying the first NaN's batch named the layer it came from (log_features)
  input wait     each step's wait for its batch measured (health/input_wait_ms)
  watchdog       the stall watchdog armed (run_info.watchdog)
  diagnose       `tb-trainhealth diagnose --json` of that venv read the three runs
  nonfinite      nan_in_layer diagnosed `nonfinite` (warning or critical)
  exploding      exploding_gradients diagnosed `exploding_gradients`
  healthy quiet  healthy_mlp got no warning and no critical finding
  tab            `tensorboard` serves the Health tab's runs route (200, the three runs), with
                 its Rust loader and with the Python one

The read side alone: venvs with `pip install .` (no [tf] extra, so no TensorFlow) at the lowest
tensorboard, protobuf, numpy and google-crc32c that setup.py allows (on the lowest Python), and
at the newest (on the newest Python), diagnose the logs the main row wrote and serve the tab.

Cells: ok; MISSING: the part recorded nothing (turned off, or an internal not found); FAIL: it
ran and gave a wrong answer, or the run broke; each with a short reason; `-`: not checked in
this row. The callback's own messages (a probe disabled, ...) are listed under the table.

Usage:
    python bench/compat.py                      # every row (first run: ~10 venvs to install)
    python bench/compat.py --quick              # the main row, tf_keras, the newest read side
    python bench/compat.py --only keras3.12,read
    python bench/compat.py --cache DIR --fresh  # venvs under DIR, built again

Exit status: 0 when every cell is ok, else 1.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "tbth_compat"

# What is tested. The current TensorFlow, every Keras 3 minor it accepts (newest patch of
# each), and the tf_keras released with it.
TENSORFLOW = "tensorflow~=2.21.0"
KERAS_MINORS = ("3.12", "3.13", "3.14", "3.15")
TF_KERAS = "tf-keras~=2.21.0"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MAIN_PYTHON = "3.11"  # its newest-Keras row writes the logs the read-side rows read
LEGACY_KERAS_ENV = {"TF_USE_LEGACY_KERAS": "1"}  # tf.keras is tf_keras

# The runs each write-side row trains (demo/scenarios.py), by role.
HEALTHY, NAN, EXPLODING = "healthy_mlp", "nan_in_layer", "exploding_gradients"
NAN_LAYER = "log_features"  # the layer of nan_in_layer that makes the first NaN
EXPECTED_CODE = {NAN: "nonfinite", EXPLODING: "exploding_gradients"}
LOUD = ("warning", "critical")

WRITE_PARTS = ("layer grads", "NaN origin", "input wait", "watchdog")
DIAGNOSIS_PARTS = ("diagnose", "nonfinite", "exploding", "healthy quiet")
PARTS = (*WRITE_PARTS, *DIAGNOSIS_PARTS, "tab")
OK, NOT_CHECKED = "ok", "-"

INSTALL_TIMEOUT_S = 1800  # TensorFlow's wheel is ~600 MB; 2 CPU cores unpack it
TRAIN_TIMEOUT_S = 900  # the three runs take ~20 s on an idle machine
DIAGNOSE_TIMEOUT_S = 300
TENSORBOARD_START_S = 120
TAB_ANSWER_S = 120  # the runs route answers "pending" while runs are first diagnosed
REASON_CHARS = 90
NOTES_PER_ROW = 4

CALLBACK_NOTE = re.compile(r"^tb-trainhealth: .*$", re.M)  # what the callback says on stderr


@dataclasses.dataclass(frozen=True)
class Combo:
    """One row: a venv and what it installs besides the project."""

    name: str  # the venv's folder, and what --only matches
    python: str  # "3.11"
    requirements: tuple[str, ...]
    read_side: bool = False  # `pip install .` alone (no [tf]): diagnose and serve the tab, no training
    legacy: bool = False  # tf_keras, TF_USE_LEGACY_KERAS=1
    lowest: bool = False  # requirements are setup.py's bounds: install the lowest release each allows
    quick: bool = False  # one of --quick's rows


# -- what setup.py promises --------------------------------------------------------------
def setup_promises() -> dict[str, object]:
    """setup.py's install_requires, extras_require and python_requires, read without running it."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"]
    wanted = {"install_requires", "extras_require", "python_requires"}
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in wanted}


def lower_bound(requirement: str) -> tuple[str, str | None]:
    """("tensorflow", "2.16") of "tensorflow>=2.16"; (name, None) without a lower bound."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*(?:>=\s*([0-9.]+))?.*", requirement)
    if match is None:
        raise ValueError(f"cannot read the requirement {requirement!r}")
    return match.group(1), match.group(2)


def by_name(requirements: list[str], name: str) -> str:
    (found,) = [r for r in requirements if lower_bound(r)[0] == name]
    return found


def combos() -> list[Combo]:
    promises = setup_promises()
    extras = promises["extras_require"]
    lowest_python = lower_bound("python" + str(promises["python_requires"]))[1]
    newest = KERAS_MINORS[-1]
    rows = [
        Combo(f"py{MAIN_PYTHON}-keras{minor}", MAIN_PYTHON, (TENSORFLOW, f"keras~={minor}.0"), quick=minor == newest)
        for minor in KERAS_MINORS
    ]
    rows.append(Combo(f"py{MAIN_PYTHON}-tf_keras", MAIN_PYTHON, (TENSORFLOW, TF_KERAS), legacy=True, quick=True))
    # each other Python with the newest Keras it can install (Keras 3.13 and later need Python 3.11)
    rows += [Combo(f"py{v}-keras", v, (TENSORFLOW, "keras")) for v in PYTHONS if v != MAIN_PYTHON]
    tensorflow = by_name(extras["tf"], "tensorflow")
    rows.append(Combo(f"py{lowest_python}-lowest-keras", lowest_python, tuple(extras["tf"]), lowest=True))
    lowest_legacy = (tensorflow, by_name(extras["test"], "tf-keras"))
    rows.append(Combo(f"py{lowest_python}-lowest-tf_keras", lowest_python, lowest_legacy, legacy=True, lowest=True))
    install = tuple(promises["install_requires"])
    rows.append(Combo(f"read-py{lowest_python}-lowest", lowest_python, install, read_side=True, lowest=True))
    rows.append(Combo(f"read-py{PYTHONS[-1]}-newest", PYTHONS[-1], (), read_side=True, quick=True))
    return rows


MAIN_ROW = f"py{MAIN_PYTHON}-keras{KERAS_MINORS[-1]}"


# -- venvs ----------------------------------------------------------------------------------
def find_python(version: str) -> str | None:
    """The newest patch of `version` under pyenv, else `pythonX.Y` on PATH."""
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(versions.glob(f"{version}.*/bin/python"), key=lambda p: release(p.parent.parent.name.split(".")[-1]))
    if found:
        return str(found[-1])
    return shutil.which(f"python{version}")


def release(text: str) -> tuple[int, ...]:
    """(2, 16, 1) of "2.16.1"; non-numeric parts (rc1, post1) count as 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in text.split("."))


def lowest_release(python: Path, requirement: str) -> str:
    """name==V for the lowest release that `name>=bound` allows and this Python can install."""
    name, bound = lower_bound(requirement)
    if bound is None:
        return requirement
    listing = run([str(python), "-m", "pip", "index", "versions", name], timeout=300).stdout
    match = re.search(r"Available versions: (.*)", listing)
    if match is None:
        raise RuntimeError(f"pip index versions {name}: {listing.strip()[-200:]}")
    allowed = [v.strip() for v in match.group(1).split(",") if release(v.strip()) >= release(bound)]
    return f"{name}=={min(allowed, key=release)}"


def run(command: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """A command that must succeed: RuntimeError with its last output lines otherwise."""
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    if proc.returncode != 0:
        raise RuntimeError(last_line(proc.stderr or proc.stdout) or f"exit status {proc.returncode}")
    return proc


def last_line(text: str) -> str:
    """The last line that says something (pip ends with its error, Python with the exception)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and "WARNING" not in line]
    return lines[-1] if lines else ""


def prepare_venv(combo: Combo, cache: Path, fresh: bool) -> Path:
    """The venv's python, installed once; raises RuntimeError when it cannot be installed."""
    interpreter = find_python(combo.python)
    if interpreter is None:
        raise RuntimeError(f"no Python {combo.python} on this machine")
    venv = cache / "venvs" / combo.name
    python, stamp = venv / "bin" / "python", venv / "compat-stamp.json"
    wanted = {"interpreter": interpreter, "requirements": list(combo.requirements), "read_side": combo.read_side}
    if not fresh and stamp.exists() and json.loads(stamp.read_text()) == wanted:
        if combo.read_side:  # a copy of the project, not a link to it: take this checkout's
            run(
                [str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(ROOT)],
                INSTALL_TIMEOUT_S,
            )
        return python
    shutil.rmtree(venv, ignore_errors=True)
    run([interpreter, "-m", "venv", str(venv)], timeout=300)
    pins = [lowest_release(python, r) for r in combo.requirements] if combo.lowest else list(combo.requirements)
    project = [str(ROOT)] if combo.read_side else ["-e", f"{ROOT}[tf]"]
    run([str(python), "-m", "pip", "install", "-q", "--prefer-binary", *project, *pins], INSTALL_TIMEOUT_S)
    stamp.write_text(json.dumps(wanted))
    return python


def venv_env(combo: Combo) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return {**env, **(LEGACY_KERAS_ENV if combo.legacy else {})}


# -- inside a write-side venv (--child LOGDIR) -----------------------------------------------
def import_scenarios():
    """demo/scenarios.py, on tf_keras where TF_USE_LEGACY_KERAS=1: its `import keras` is given
    tf_keras for that one import (the callback's own `import keras` still gets Keras 3)."""
    sys.path.insert(0, str(ROOT / "demo"))
    if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
        import scenarios

        return scenarios
    import tf_keras

    keras_3 = sys.modules.pop("keras", None)
    sys.modules["keras"] = tf_keras
    try:
        import scenarios
    finally:
        if keras_3 is None:
            del sys.modules["keras"]
        else:
            sys.modules["keras"] = keras_3
    return scenarios


def installed_versions() -> dict[str, str | None]:
    from importlib import metadata

    names = ("tensorflow", "keras", "tf-keras", "tensorboard", "protobuf", "numpy", "google-crc32c")
    found: dict[str, str | None] = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def recorded(logdir: str) -> dict[str, dict]:
    """What each run recorded, read back with the project's own reader."""
    from tb_trainhealth.contract import series as sig
    from tb_trainhealth.read.logdir import open_logdir
    from tb_trainhealth.read.reader import SignalReader

    reader = SignalReader(open_logdir(logdir))
    found = {}
    for group in reader.groups():
        signals = reader.read(group)
        grads = signals.layer_series.get(sig.LAYER_GRAD_NORM)
        loss, wait = signals.get(sig.LOSS), signals.get(sig.INPUT_WAIT_MS)
        found[group.name] = {
            "steps": len(loss) if loss is not None else 0,
            "layers": len(signals.info.layers),
            "layer_grads": list(grads.values.shape) if grads is not None else None,
            "layer_grads_finite": bool(grads is not None and (grads.values == grads.values).all()),
            "input_wait_measured": signals.info.input_wait_measured,
            "input_waits": int((wait.values >= 0).sum()) if wait is not None else 0,
            "watchdog": signals.info.watchdog,
            "nan_origins": [
                {"where": e.where, "layer": e.layer, "op": e.op} for e in signals.events if e.kind == "nan_origin"
            ],
            "errors": signals.errors[:3],
        }
    return found


def child(logdir: str) -> None:
    """Trains the three runs into `logdir` and prints, as its last line, what they recorded."""
    scenarios = import_scenarios()
    trained = {}
    for name in (HEALTHY, NAN, EXPLODING):
        try:
            getattr(scenarios, name)(os.path.join(logdir, name))
            trained[name] = None
        except Exception as err:
            trained[name] = f"{type(err).__name__}: {err}"
    print(json.dumps({"versions": installed_versions(), "trained": trained, "recorded": recorded(logdir)}))


# -- judging a row -------------------------------------------------------------------------
def cell(verdict: str, reason: str = "") -> str:
    reason = " ".join(reason.split())
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 3] + "..."
    return f"{verdict}: {reason}" if reason else verdict


def failed(parts: tuple[str, ...], reason: str) -> dict[str, str]:
    """Every part of `parts` failed for one reason: said in the first, the others only FAIL;
    the rest of the row not checked."""
    return {
        part: cell("FAIL", reason) if part == parts[0] else "FAIL" if part in parts else NOT_CHECKED for part in PARTS
    }


def checked_parts(combo: Combo) -> tuple[str, ...]:
    return (*DIAGNOSIS_PARTS, "tab") if combo.read_side else (*WRITE_PARTS, *DIAGNOSIS_PARTS)


def write_cells(report: dict, disabled: list[str]) -> dict[str, str]:
    """The write-side parts from what the child recorded; `disabled`: the callback's 'probe
    disabled' lines, the reason a part is missing."""
    cells = {}
    runs, trained = report["recorded"], report["trained"]
    why_missing = disabled[0].removeprefix("tb-trainhealth: ") if disabled else "not recorded"

    def run_of(name: str) -> dict | None:
        if trained.get(name):
            return None
        return runs.get(name)

    healthy, nan = run_of(HEALTHY), run_of(NAN)
    if healthy is None:
        broken = cell("FAIL", f"{HEALTHY}: {trained.get(HEALTHY) or 'no run read back'}")
        cells.update({part: broken for part in ("layer grads", "input wait", "watchdog")})
    else:
        expected = [healthy["steps"], healthy["layers"]]
        if healthy["layer_grads"] is None:
            cells["layer grads"] = cell("MISSING", why_missing)
        elif healthy["layer_grads"] != expected or not healthy["layer_grads_finite"]:
            cells["layer grads"] = cell(
                "FAIL", f"shape {healthy['layer_grads']} (want {expected}), finite={healthy['layer_grads_finite']}"
            )
        else:
            cells["layer grads"] = OK
        if not healthy["input_wait_measured"] or not healthy["input_waits"]:
            cells["input wait"] = cell("MISSING", why_missing)
        else:
            cells["input wait"] = (
                OK
                if healthy["input_waits"] == healthy["steps"]
                else cell("FAIL", f"{healthy['input_waits']} of {healthy['steps']} steps")
            )
        cells["watchdog"] = OK if healthy["watchdog"] else cell("MISSING", why_missing)
    if nan is None:
        cells["NaN origin"] = cell("FAIL", f"{NAN}: {trained.get(NAN) or 'no run read back'}")
    else:
        layers = [o["layer"] for o in nan["nan_origins"]]
        if not layers:
            cells["NaN origin"] = cell("MISSING", why_missing)
        else:
            cells["NaN origin"] = OK if layers[0] == NAN_LAYER else cell("FAIL", f"named {nan['nan_origins'][0]}")
    return cells


def diagnose(python: Path, logdir: Path, env: dict[str, str]) -> dict[str, list[str]]:
    """`tb-trainhealth diagnose --json` of that venv: each run's warning and critical codes."""
    cli = python.parent / "tb-trainhealth"
    proc = subprocess.run(
        [str(cli), "diagnose", str(logdir), "--json"],
        capture_output=True,
        text=True,
        timeout=DIAGNOSE_TIMEOUT_S,
        env=env,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"exit {proc.returncode}: {last_line(proc.stderr)}")
    runs = json.loads(proc.stdout)["runs"]
    return {r["run"]: [f["code"] for f in r["findings"] if f["severity"] in LOUD] for r in runs}


def diagnosis_cells(python: Path, logdir: Path, env: dict[str, str], trained: dict[str, str | None]) -> dict[str, str]:
    try:
        loud = diagnose(python, logdir, env)
    except Exception as err:
        failed = cell("FAIL", f"diagnose: {err}")
        return dict.fromkeys(DIAGNOSIS_PARTS, failed)
    cells = {}
    missing = [name for name in (HEALTHY, NAN, EXPLODING) if name not in loud]
    cells["diagnose"] = cell("FAIL", f"runs not listed: {missing}") if missing else OK
    for part, name in (("nonfinite", NAN), ("exploding", EXPLODING)):
        if trained.get(name):
            cells[part] = cell("FAIL", f"{name}: {trained[name]}")
        elif name not in loud:
            cells[part] = cell("FAIL", "run not listed")
        else:
            cells[part] = OK if EXPECTED_CODE[name] in loud[name] else cell("FAIL", f"got {loud[name]}")
    if trained.get(HEALTHY) or HEALTHY not in loud:
        cells["healthy quiet"] = cell("FAIL", trained.get(HEALTHY) or "run not listed")
    else:
        cells["healthy quiet"] = cell("FAIL", f"got {loud[HEALTHY]}") if loud[HEALTHY] else OK
    return cells


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str) -> tuple[int, object]:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.status, json.loads(response.read())


@contextlib.contextmanager
def tensorboard(python: Path, logdir: Path, env: dict[str, str], load_fast: bool):
    """A `tensorboard` of that venv on a free loopback port; yields its URL."""
    port = free_port()
    command = [str(python.parent / "tensorboard"), "--logdir", str(logdir), "--host", "127.0.0.1",
               "--port", str(port), f"--load_fast={str(load_fast).lower()}", "--reload_interval", "1"]  # fmt: skip
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + TENSORBOARD_START_S
            while True:
                try:
                    get_json(url + "/data/plugins_listing")
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        output.seek(0)
                        raise RuntimeError(f"did not start: {last_line(output.read())}") from None
                    time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def tab_answer(url: str) -> str | None:
    """None when the tab is listed and its runs route answers 200 with the three runs as
    `diagnose` judges them; else what is wrong."""
    _, listing = get_json(url + "/data/plugins_listing")
    if "trainhealth" not in listing:
        return f"tab not listed ({sorted(listing)[:6]})"
    deadline, answer = time.monotonic() + TAB_ANSWER_S, None
    while time.monotonic() < deadline:
        status, answer = get_json(url + "/data/plugin/trainhealth/runs")
        statuses = {r["run"]: r["status"] for r in answer["runs"]}
        if status == 200 and all(statuses.get(n) not in (None, "pending") for n in (HEALTHY, NAN, EXPLODING)):
            want = {HEALTHY: "ok", NAN: "critical", EXPLODING: "critical"}
            wrong = {n: s for n, s in statuses.items() if n in want and s != want[n]}
            return f"statuses {wrong}" if wrong else None
        time.sleep(1)
    return f"runs not all diagnosed in {TAB_ANSWER_S} s: {answer}"


def tab_cell(python: Path, logdir: Path, env: dict[str, str]) -> str:
    """The tab on TensorBoard's Rust loader (load_fast) and on its Python one."""
    problems = []
    for load_fast in (True, False):
        loader = "rust" if load_fast else "python"
        try:
            with tensorboard(python, logdir, env, load_fast) as url:
                problem = tab_answer(url)
        except Exception as err:
            problem = f"{type(err).__name__}: {err}"
        if problem:
            problems.append(f"{loader} loader: {problem}")
    return cell("FAIL", "; ".join(problems)) if problems else OK


def write_row(combo: Combo, python: Path, cache: Path) -> tuple[dict[str, str], dict, list[str]]:
    """(cells, versions, the callback's notes) of a write-side row."""
    logdir = cache / "logs" / combo.name
    shutil.rmtree(logdir, ignore_errors=True)
    logdir.mkdir(parents=True)
    env = venv_env(combo)
    try:
        proc = subprocess.run([str(python), __file__, "--child", str(logdir)], capture_output=True, text=True,
                              timeout=TRAIN_TIMEOUT_S, env=env, cwd=cache)  # fmt: skip
    except subprocess.TimeoutExpired:
        return failed(checked_parts(combo), f"timeout after {TRAIN_TIMEOUT_S} s"), {}, []
    notes = list(dict.fromkeys(CALLBACK_NOTE.findall(proc.stderr)))
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return failed(checked_parts(combo), last_line(proc.stderr) or f"exit status {proc.returncode}"), {}, notes
    disabled = [note for note in notes if "disabled" in note]
    cells = {**write_cells(report, disabled), **diagnosis_cells(python, logdir, env, report["trained"])}
    cells["tab"] = NOT_CHECKED
    return cells, report["versions"], notes


def read_row(combo: Combo, python: Path, cache: Path) -> tuple[dict[str, str], dict, list[str]]:
    """(cells, versions, notes) of a read-side row, on the main row's logs."""
    logdir = cache / "logs" / MAIN_ROW
    env = venv_env(combo)
    code = "import json, sys; sys.path.insert(0, sys.argv[1]); import compat; print(json.dumps(compat.installed_versions()))"
    versions = json.loads(run([str(python), "-c", code, str(ROOT / "bench")], timeout=120, env=env, cwd=cache).stdout)
    if versions["tensorflow"] is not None:
        return failed(checked_parts(combo), f"tensorflow {versions['tensorflow']} installed"), versions, []
    if not (logdir / HEALTHY).is_dir():
        return failed(checked_parts(combo), f"no logs from the {MAIN_ROW} row"), versions, []
    cells = dict.fromkeys(WRITE_PARTS, NOT_CHECKED)
    trained = dict.fromkeys((HEALTHY, NAN, EXPLODING))
    cells.update(diagnosis_cells(python, logdir, env, trained))
    cells["tab"] = tab_cell(python, logdir, env)
    return cells, versions, []


def label(combo: Combo, versions: dict) -> str:
    """How a row is called in the table: what it ran on (its specifiers before it ran)."""
    if not versions:
        return f"Python {combo.python}, " + ", ".join(combo.requirements or ("newest",))
    shown = (("python", "Python"), ("tensorflow", "TF"), ("keras", "Keras"))
    if combo.legacy:
        shown = (*shown[:2], ("tf-keras", "tf_keras"))
    if combo.read_side:
        shown = (("python", "Python"), ("tensorboard", "TensorBoard"), ("protobuf", "protobuf"), ("numpy", "numpy"))
    text = ", ".join(f"{title} {versions.get(key)}" for key, title in shown)
    return f"read side: {text}" if combo.read_side else text


def check(combo: Combo, cache: Path, fresh: bool) -> tuple[str, dict[str, str], list[str]]:
    """(label, cells, notes) of one row; any failure is its cells, never an exception."""
    try:
        python = prepare_venv(combo, cache, fresh)
    except Exception as err:
        return label(combo, {}), failed(checked_parts(combo), f"install: {err}"), []
    try:
        cells, versions, notes = (read_row if combo.read_side else write_row)(combo, python, cache)
    except Exception as err:
        return label(combo, {}), failed(checked_parts(combo), f"{type(err).__name__}: {err}"), []
    return label(combo, versions), cells, notes


def table(rows: list[tuple[str, dict[str, str]]]) -> str:
    lines = ["| versions | " + " | ".join(PARTS) + " |", "|---" * (len(PARTS) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(cells[p] for p in PARTS) + " |" for name, cells in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated parts of row names (see --list)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the venvs and logs stay between runs")
    parser.add_argument("--quick", action="store_true", help="the main row, tf_keras and the newest read side")
    parser.add_argument("--fresh", action="store_true", help="install the venvs again (newer patch releases)")
    parser.add_argument("--list", action="store_true", help="the rows, without running them")
    parser.add_argument("--child", metavar="LOGDIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    selected = [c for c in combos() if (not args.quick or c.quick)]
    if args.only:
        selected = [c for c in selected if any(part in c.name for part in args.only.split(","))]
    needs_logs = any(c.read_side for c in selected) and not (args.cache / "logs" / MAIN_ROW).is_dir()
    if needs_logs and MAIN_ROW not in {c.name for c in selected}:  # the read side reads its logs
        selected.insert(0, next(c for c in combos() if c.name == MAIN_ROW))
    if args.list:
        print("\n".join(f"{c.name}: Python {c.python} {' '.join(c.requirements)}" for c in selected))
        return 0
    args.cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rows, notes = [], []
    for combo in selected:
        row_started = time.monotonic()
        name, cells, said = check(combo, args.cache, args.fresh)
        rows.append((name, cells))
        notes += [f"{name}: {note}" for note in said[:NOTES_PER_ROW]]
        print(
            f"[{time.monotonic() - row_started:5.0f} s] {combo.name}: " + ", ".join(f"{p} {cells[p]}" for p in PARTS),
            flush=True,
        )
    minutes = (time.monotonic() - started) / 60
    print(f"\nChecked {datetime.date.today().isoformat()} with `python bench/compat.py` ({minutes:.0f} min):\n")
    print(table(rows))
    if notes:
        print("\nThe callback said:\n" + "\n".join(f"- {note}" for note in notes))
    return 0 if all(v in (OK, NOT_CHECKED) for _, cells in rows for v in cells.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
