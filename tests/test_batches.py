"""Sampled batches in the form each GNN backend takes (ttgnn/batches.py). The pinned,
non-blocking copies to a GPU are checked where one is, in tests/test_gpu_path.py."""
import os
import warnings
from types import SimpleNamespace

import pytest
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")
import dgl  # noqa: E402

from ttgnn.batches import device_batches  # noqa: E402
from ttgnn.layers import SparseGraph  # noqa: E402


def _loader():
    """A loader of one batch (nodes 0 and 2, two layers, every neighbour) with int32 node ids."""
    graph = dgl.graph((torch.tensor([0, 1, 2, 3, 4, 0]), torch.tensor([1, 2, 3, 4, 0, 2])), num_nodes=5,
                      idtype=torch.int32)
    seeds = torch.tensor([0, 2], dtype=torch.int32)
    return dgl.dataloading.DataLoader(graph, seeds, dgl.dataloading.MultiLayerFullNeighborSampler(2),
                                      batch_size=2, shuffle=False)


def _edges(graph: SparseGraph) -> list[tuple[int, int]]:
    """The (source, destination) pairs, sorted: the sampler may list a destination's edges in
    another order each time."""
    return sorted(zip(graph.indices.tolist(), graph.dst.tolist()))


@pytest.mark.parametrize("backend", ["torch", "dgl"])
def test_batches_come_in_the_form_the_backend_takes(backend):
    loader = _loader()
    ((input_ids, output_ids, dgl_blocks),) = list(loader)
    ((input_nodes, output_nodes, blocks),) = list(device_batches(loader, SimpleNamespace(backend=backend),
                                                                 torch.device("cpu")))
    assert input_nodes.dtype == output_nodes.dtype == torch.int64
    assert torch.equal(input_nodes, input_ids.long()) and torch.equal(output_nodes, output_ids.long())
    assert len(blocks) == len(dgl_blocks) == 2
    for block, dgl_block in zip(blocks, dgl_blocks):
        if backend == "torch":  # index tensors, the same structure
            expected = SparseGraph.from_dgl(dgl_block)
            assert isinstance(block, SparseGraph) and block.num_src == expected.num_src
            assert torch.equal(block.indptr, expected.indptr) and _edges(block) == _edges(expected)
        else:  # DGL's blocks as the loader gives them
            assert isinstance(block, dgl.DGLGraph) and block.is_block
            assert torch.equal(block.srcdata[dgl.NID], dgl_block.srcdata[dgl.NID])


def _affinity_warnings(iterate) -> list[str]:
    """The messages of DGL's CPU-affinity advice that ``iterate()`` gives, each one counted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iterate()
    return [str(w.message) for w in caught if "CPU affinity" in str(w.message)]


def test_batches_come_without_dgls_cpu_affinity_advice():
    # DGL advises enabling CPU affinity on every CPU loader's iteration, where psutil can set it
    # (Linux): advice for worker processes, which ttgnn's loaders do not start
    import psutil

    advised = 1 if hasattr(psutil.Process, "cpu_affinity") else 0
    assert len(_affinity_warnings(lambda: list(_loader()))) == advised
    for backend in ("torch", "dgl"):
        gnn = SimpleNamespace(backend=backend)
        assert _affinity_warnings(lambda: list(device_batches(_loader(), gnn, torch.device("cpu")))) == []
    assert len(_affinity_warnings(lambda: list(_loader()))) == advised  # no filter left behind


def test_only_dgls_cpu_affinity_advice_is_held_back():
    from ttgnn.batches import loader_batches

    class Loader:  # iterating warns twice, as a DGL loader could: the advice and something else
        def __iter__(self):
            warnings.warn("Dataloader CPU affinity opt is not enabled, consider switching it on")
            warnings.warn("something the caller should see")
            return iter([1, 2])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(loader_batches(Loader())) == [1, 2]
    assert [str(w.message) for w in caught] == ["something the caller should see"]
