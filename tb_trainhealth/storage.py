"""Which library reaches a bucket (s3://, gs://) here, and what to install where none does.

Both sides use it and neither imports TensorFlow through it. The write side uploads through
fsspec (s3fs, gcsfs), the read side reads through TensorBoard's own filesystems without
TensorFlow (boto3 for s3://, fsspec for the rest): TensorFlow 2.21 has no s3:// filesystem,
and its gs:// one (like TensorBoard's data server) talks to storage.googleapis.com only.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import urllib.parse
from typing import Any

from tb_trainhealth.run_paths import is_local

# scheme -> the extra that brings what both sides need for it.
EXTRAS = {"s3": "s3", "gs": "gcs", "gcs": "gcs"}
# scheme -> the modules that extra brings: fsspec's implementation first (writes), then any other
# module TensorBoard reads the scheme with.
MODULES = {"s3": ("s3fs", "boto3"), "gs": ("gcsfs",), "gcs": ("gcsfs",)}


def scheme(url: str) -> str:
    """'s3' for 's3://bucket/logs'; '' for a local path."""
    return "" if is_local(url) else url.split("://", 1)[0].lower()


def requirement(url: str) -> str:
    """What to pip install for `url`'s scheme: "tb-trainhealth[s3]"; "" where none is known."""
    name = scheme(url)
    return f"tb-trainhealth[{EXTRAS[name]}]" if name in EXTRAS else ""


def install_hint(url: str) -> str:
    """The command that makes `url` reachable, or why nothing tested does."""
    if requirement(url):
        return f"pip install '{requirement(url)}'"
    return f"tb-trainhealth is tested with s3:// and gs:// only; no library for {scheme(url)}:// is known to it"


def missing_modules(url: str) -> list[str]:
    """The modules `url`'s scheme needs that are not installed ([] for a local path)."""
    name = scheme(url)
    if not name:
        return []
    needed = MODULES.get(name)
    if needed is None:  # untested here: left to TensorFlow's filesystems
        return [f"a library tested with {name}://"]
    return [module for module in needed if importlib.util.find_spec(module) is None]


def fsspec_writable(url: str) -> bool:
    """Whether fsspec can write `url` here: a tested scheme whose implementation is installed."""
    name = scheme(url)
    return name in MODULES and _fsspec_knows(name)


def readable_without_tensorflow(url: str) -> bool:
    """Whether TensorBoard's own filesystems (its TensorFlow stub) read `url` here."""
    return is_local(url) or not missing_modules(url)


def unreachable(url: str, by: str) -> str:
    """A sentence for a bucket `by` cannot reach here, with what to install."""
    missing = missing_modules(url) if scheme(url) in MODULES else []
    lacking = f" ({', '.join(missing)} not installed)" if missing else ""
    return f"{by} cannot reach {url}: nothing here reads or writes {scheme(url)}://{lacking}; {install_hint(url)}"


def reader_problem(url: str, tb_tf: Any) -> str | None:
    """Why TensorBoard's loader cannot read the bucket `url` here (with what to do), or None.
    `tb_tf`: `tensorboard.compat.tf`, TensorFlow or TensorBoard's stub of it, whichever loads."""
    if is_local(url):
        return None
    try:
        tb_tf.io.gfile.exists(url)
    except (ImportError, ValueError, tb_tf.errors.UnimplementedError):
        pass  # the stub has no filesystem for the prefix; TensorFlow: "scheme not implemented"
    except Exception:  # the scheme is there; a refused request is told where it happens
        return None
    else:
        return None
    if getattr(tb_tf, "__version__", "stub") != "stub" and not missing_modules(url):
        return (
            f"TensorBoard cannot read {url}: where TensorFlow is installed TensorBoard reads through it, and "
            f"TensorFlow has no {scheme(url)}:// filesystem. Start TensorBoard from an environment without "
            f"TensorFlow: pip install tensorboard '{requirement(url)}'"
        )
    return unreachable(url, "TensorBoard")


def _fsspec_knows(name: str) -> bool:
    if importlib.util.find_spec("fsspec") is None:
        return False
    import fsspec

    try:
        fsspec.get_filesystem_class(name)
    except (ImportError, ValueError):
        return False
    return True


# -- a store that refuses, or cannot be reached ------------------------------------------------

# What each store's client reads to find a store that is not the cloud's own (docs/object-storage.md).
ENDPOINT_VARIABLES = {"s3": "AWS_ENDPOINT_URL", "gs": "STORAGE_EMULATOR_HOST", "gcs": "STORAGE_EMULATOR_HOST"}
CREDENTIAL_HINTS = {
    "s3": "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",
    "gs": "check GOOGLE_APPLICATION_CREDENTIALS (or gcloud auth application-default login)",
    "gcs": "check GOOGLE_APPLICATION_CREDENTIALS (or gcloud auth application-default login)",
}
# S3 error codes that mean "these credentials may not do this".
_REFUSED_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "InvalidToken", "403"}
)
# Modules whose exceptions come from a store or the way to it.
_STORE_MODULES = ("botocore", "boto3", "aiobotocore", "s3fs", "gcsfs", "aiohttp", "google", "urllib3", "requests")
# One try, a short wait: a store that does not answer is said at once, not after minutes of retries.
PROBE_TIMEOUT_S = 10


def refusal(url: str, err: BaseException) -> str | None:
    """One line for `err` where it is a store refusing `url` or not answering, with what to check;
    None where it is no such error. Looks through the error's causes too."""
    name = scheme(url)
    seen: BaseException | None = err
    for _ in range(6):
        if seen is None:
            return None
        why = _one_refusal(name, seen)
        if why is not None:
            return why
        seen = seen.__cause__ or seen.__context__
    return None


def _one_refusal(name: str, err: BaseException) -> str | None:
    kind = type(err).__name__
    endpoint = f"check the endpoint ({ENDPOINT_VARIABLES[name]}) and the network" if name in ENDPOINT_VARIABLES else ""
    response = getattr(err, "response", None)
    code = str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
    status = getattr(err, "code", None) if name in ("gs", "gcs") else None
    if code == "NoSuchBucket" or (isinstance(err, FileNotFoundError) and _bucket_only(err)):
        return f"the bucket does not exist ({code or kind})"
    if (
        code in _REFUSED_CODES
        or isinstance(err, PermissionError)
        or status in (401, 403)
        or kind == "NoCredentialsError"
    ):
        hint = CREDENTIAL_HINTS.get(name, "check the credentials")
        return f"the store refused the credentials ({code or kind}: {_first_line(err)}); {hint}"
    if kind in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError") or (
        isinstance(err, (ConnectionError, TimeoutError)) or kind.startswith("ClientConnector")
    ):
        return f"the store does not answer ({kind}: {_first_line(err)}); {endpoint or 'check the network'}"
    if code:
        return f"the store refused the request ({code}: {_first_line(err)})"
    if type(err).__module__.split(".")[0] in _STORE_MODULES:
        return f"the store failed the request ({kind}: {_first_line(err)})"
    return None


def _bucket_only(err: FileNotFoundError) -> bool:
    """A FileNotFoundError that names a bucket, not an object (gcsfs: 'b/' or 'b')."""
    text = str(err)
    return "bucket" in text.lower()


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def probe_listing(url: str) -> str | None:
    """Why listing the bucket `url` fails (one line, see `refusal`), or None where it lists (empty
    or not) or nothing here can tell. One request, no retries: asked when a bucket read as empty."""
    name = scheme(url)
    bucket, _, prefix = url.split("://", 1)[1].partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    closed = endpoint_closed(name)
    if closed is not None:  # (gcsfs retries a refused connection for half a minute)
        return closed
    try:
        if name == "s3" and importlib.util.find_spec("boto3") is not None:
            import boto3
            from botocore.config import Config

            config = Config(retries={"max_attempts": 1}, connect_timeout=PROBE_TIMEOUT_S, read_timeout=PROBE_TIMEOUT_S)
            boto3.client("s3", config=config).list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        elif name in ("gs", "gcs") and _fsspec_knows(name):
            import fsspec

            filesystem = fsspec.filesystem(name, skip_instance_cache=True, retries=1)
            filesystem.ls(bucket)
        else:
            return None
    except Exception as err:
        return refusal(url, err) or f"the store failed the request ({type(err).__name__}: {_first_line(err)})"
    return None


def endpoint_closed(name: str) -> str | None:
    """Why the endpoint a store variable names takes no connection (one line), or None (it
    does, or no variable names one: the cloud's own, left to the client)."""
    variable = ENDPOINT_VARIABLES.get(name)
    endpoint = os.environ.get(variable or "", "")
    if not endpoint:
        return None
    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname or "localhost", port), timeout=PROBE_TIMEOUT_S).close()
    except OSError as err:
        return (
            f"the store does not answer (cannot connect to {endpoint}: {err.strerror or err}); "
            f"check the endpoint ({variable}) and the network"
        )
    return None
