"""conftest.py — shared fixtures of the Python tests: the shared model folder and a scratch dir."""

import os
import pathlib

import pytest


def _shared_dir():
    env = os.environ.get("MPCAFFE_SHARED_DIR")
    if env:
        return pathlib.Path(env)
    repo = pathlib.Path(__file__).resolve().parents[2]
    return repo.parent / "shared"


@pytest.fixture(scope="session")
def paper_models():
    """../shared/models/paper_examples (MPCAFFE_SHARED_DIR overrides ../shared)."""
    path = _shared_dir() / "models" / "paper_examples"
    if not path.is_dir():
        pytest.fail(f"paper example models not found at {path}; set MPCAFFE_SHARED_DIR")
    return path


@pytest.fixture(scope="session")
def bvlc_models():
    """../shared/models/bvlc (lenet, cifar10, bvlc_alexnet prototxts)."""
    path = _shared_dir() / "models" / "bvlc"
    if not path.is_dir():
        pytest.fail(f"BVLC models not found at {path}; set MPCAFFE_SHARED_DIR")
    return path
