"""Shared pytest fixtures."""
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The real graphs' root (``$TTGNN_DATA``, else ``./dataset``).

    Tests that need real data are skipped when no root is configured and ``./dataset`` is
    missing; when ``$TTGNN_DATA`` names a missing folder (``.ci/run`` always sets it) or ``$CI`` is
    set, they fail instead.
    """
    explicit = os.environ.get("TTGNN_DATA")
    root = explicit or "dataset"  # same fallback as ttgnn.data.resolve_root
    if Path(root).is_dir():
        return Path(root)
    message = f"real graphs not found: {root!r} is not a folder (set TTGNN_DATA)"
    if explicit or os.environ.get("CI"):
        pytest.fail(message + " (TTGNN_DATA or CI is set, so this is an error)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def planted():
    """A 400-node, 4-class planted-partition graph (homophily 0.9): the small training graph."""
    from ttgnn.data import planted_partition

    return planted_partition(400, num_classes=4, avg_degree=8, homophily=0.9, seed=0)
