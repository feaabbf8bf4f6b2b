"""Sampled mini-batches in the form a GNN backend takes, on the device it runs on."""
from __future__ import annotations

import warnings

import torch

__all__ = ["device_batches", "loader_batches"]


def loader_batches(loader):
    """``iter(loader)`` of a DGL ``DataLoader``, without the ``DGLWarning`` that every CPU loader's
    iteration gives ("Dataloader CPU affinity opt is not enabled"): its advice is about worker
    processes, and ttgnn's loaders sample in the training process (``num_workers=0``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Dataloader CPU affinity opt is not enabled")
        return iter(loader)


def device_batches(loader, gnn, device: torch.device):
    """``(input_nodes, output_nodes, blocks)`` of each batch of a DGL ``loader``, ready for ``gnn`` on ``device``.

    For the ``"torch"`` backend each DGL block becomes index tensors (:class:`~ttgnn.layers.SparseGraph`)
    on the CPU; on a GPU they and the node ids are pinned and copied with ``non_blocking=True``, so
    the copy is queued behind the previous step's kernels and the CPU goes on to sample the next
    batch while the GPU computes. For ``"dgl"`` the blocks are as the loader gives them. Node ids
    are ``int64``.
    """
    from .layers import SparseGraph

    pin = device.type == "cuda"

    def to_device(tensor):
        return (tensor.pin_memory() if pin else tensor).to(device, non_blocking=pin)

    for input_nodes, output_nodes, blocks in loader_batches(loader):
        input_nodes, output_nodes = input_nodes.long(), output_nodes.long()
        if gnn.backend == "torch":
            blocks = [SparseGraph.from_dgl(block) for block in blocks]
            if pin:
                blocks = [block.pin_memory() for block in blocks]
            blocks = [block.to(device, non_blocking=pin) for block in blocks]
            input_nodes, output_nodes = to_device(input_nodes), to_device(output_nodes)
        yield input_nodes, output_nodes, blocks
