"""Shared pytest fixtures."""
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The real graphs' root (``$TTGNN_DATA``, else ``./dataset``).

    Tests that need real data are skipped when it is missing, except under CI (``$CI`` set),
    where a missing dataset root is a failure.
    """
    root = os.environ.get("TTGNN_DATA") or "dataset"  # same fallback as ttgnn.data.resolve_root
    if Path(root).is_dir():
        return Path(root)
    message = f"real graphs not found: {root!r} is not a folder (set TTGNN_DATA)"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is an error)")
    pytest.skip(message)
