"""ttgnn.evaluation.Accuracy: plain accuracy and ogb's Evaluator agree, node by node, whatever the column shape."""
import math

import pytest
import torch

from ttgnn.evaluation import Accuracy

PRED = torch.tensor([0, 1, 2, 2, 1])
LABELS = torch.tensor([0, 1, 1, 2, 0])  # 3 of 5 right


@pytest.mark.parametrize("name", [None, "ogbn-arxiv"], ids=["plain", "ogb"])
@pytest.mark.parametrize("pred_shape, label_shape", [((5,), (5,)), ((5, 1), (5,)), ((5,), (5, 1)), ((5, 1), (5, 1))])
def test_accuracy_compares_node_by_node_in_any_column_shape(name, pred_shape, label_shape):
    # a (5, 1) column against (5,) ids broadcast to a 5 x 5 comparison before: 0.32, not 0.6
    accuracy = Accuracy(name)
    assert accuracy(PRED.reshape(pred_shape), LABELS.reshape(label_shape)) == pytest.approx(0.6)


@pytest.mark.parametrize("name", [None, "ogbn-arxiv"], ids=["plain", "ogb"])
def test_accuracy_of_no_nodes_is_nan_and_of_mismatched_counts_an_error(name):
    accuracy = Accuracy(name)
    assert math.isnan(accuracy(torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)))
    with pytest.raises(ValueError, match=r"^4 predictions for 5 labels: one class id per node in each$"):
        accuracy(PRED[:4], LABELS)
