"""Fixtures of the culturelens Python tests: the CLI binary and the synthetic demo table it writes.

The tests run against the INSTALLED package (the built wheel in a fresh virtualenv, see
scripts/test.sh), never the source tree, and compare it with the `culturelens` binary named by
CULTURELENS_BIN (default: target/debug/culturelens of the checkout).
"""

import os
import pathlib
import subprocess

import numpy as np
import pandas as pd
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def cli():
    """Runs the CLI; returns the completed process (check=False), its stderr as text."""
    binary = os.environ.get("CULTURELENS_BIN") or str(
        pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "culturelens"
    )
    if not os.access(binary, os.X_OK):
        pytest.fail(f"the culturelens binary {binary} is missing: build it (cargo build -p culturelens) or set CULTURELENS_BIN")

    def run(*args):
        return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, check=False)

    return run


@pytest.fixture(scope="session")
def demo(cli, tmp_path_factory):
    """The CLI's synthetic demo table: (folder, embeddings as read by numpy, meta as text)."""
    folder = tmp_path_factory.mktemp("demo")
    done = cli("demo", "--write", folder)
    assert done.returncode == 0, done.stderr
    embeddings = np.load(folder / "embeddings.npy")
    meta = pd.read_csv(folder / "meta.csv", dtype=str, keep_default_na=False)
    return folder, embeddings, meta
