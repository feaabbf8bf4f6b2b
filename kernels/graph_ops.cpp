// Schemas of the graph ops (GNN message passing on a CSR graph) and their input checks.
//
// The CPU kernels register in kernels/cpu/graph_ops_cpu.cpp. There are no CUDA kernels: on a GPU
// the tensor layers (ttgnn/layers.py) use torch's sparse products (cuSPARSE), which these ops
// replace on the CPU only. The Python side (ttgnn/graph_ops.py) adds fake (meta) kernels; the
// autograd formulas live in the layers' autograd functions.
#include "graph_ops.h"

#include <ATen/ops/aminmax.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/min.h>
#include <torch/library.h>

namespace ttgnn {
namespace {

void check_index_range(const at::Tensor& values, int64_t size, const char* op, const char* name,
                       const char* what) {
  if (values.numel() == 0) return;
  const auto [lo, hi] = at::aminmax(values);
  const int64_t low = lo.item<int64_t>();
  const int64_t high = hi.item<int64_t>();
  TORCH_CHECK(low >= 0 && high < size, op, ": ", name, " of ", what, " must lie in [0, ", size,
              "), got values in [", low, ", ", high, "]");
}

}  // namespace

CsrDims check_csr(const at::Tensor& indptr, const at::Tensor& indices, int64_t num_src,
                  const char* op, const char* what) {
  TORCH_CHECK(indptr.defined() && indices.defined(), op, ": the indptr or indices of ", what,
              " is undefined");
  TORCH_CHECK(indptr.dim() == 1 && indptr.size(0) >= 1 && indices.dim() == 1, op,
              ": the indptr of ", what, " must be (num_dst + 1,) and its indices (E,), got shapes ",
              indptr.sizes(), " and ", indices.sizes());
  TORCH_CHECK(indptr.scalar_type() == at::kLong && indices.scalar_type() == at::kLong, op,
              ": the indptr and indices of ", what, " must be int64, got ", indptr.scalar_type(),
              " and ", indices.scalar_type());
  TORCH_CHECK(indptr.device() == indices.device(), op, ": the indptr of ", what, " is on ",
              indptr.device(), " but its indices are on ", indices.device());
  const int64_t num_edges = indices.size(0);
  const int64_t first = indptr[0].item<int64_t>();
  const int64_t last = indptr[-1].item<int64_t>();
  TORCH_CHECK(first == 0 && last == num_edges, op, ": the indptr of ", what,
              " must run from 0 to E = ", num_edges, ", got ", first, " .. ", last);
  // Every pointer in [0, E] first: then differences cannot wrap around, and a non-negative
  // smallest difference means non-decreasing.
  check_index_range(indptr, num_edges + 1, op, "the indptr", what);
  if (indptr.size(0) > 1) {
    const int64_t step = at::min(at::diff(indptr)).item<int64_t>();
    TORCH_CHECK(step >= 0, op, ": the indptr of ", what, " must be non-decreasing");
  }
  check_index_range(indices, num_src, op, "the indices", what);
  return {indptr.size(0) - 1, num_src, num_edges};
}

void check_values(const at::Tensor& tensor, const char* name, int64_t dim,
                  std::initializer_list<int64_t> sizes, const at::Tensor& like, const char* op) {
  TORCH_CHECK(tensor.defined(), op, ": ", name, " is undefined");
  TORCH_CHECK(tensor.scalar_type() == at::kFloat || tensor.scalar_type() == at::kDouble, op, ": ",
              name, " must be float32 or float64, got ", tensor.scalar_type());
  TORCH_CHECK(tensor.scalar_type() == like.scalar_type(), op, ": ", name, " has dtype ",
              tensor.scalar_type(), " but the features have ", like.scalar_type());
  TORCH_CHECK(tensor.device() == like.device(), op, ": ", name, " is on ", tensor.device(),
              " but the features are on ", like.device());
  TORCH_CHECK(tensor.dim() == dim, op, ": ", name, " must have ", dim, " dimensions, got shape ",
              tensor.sizes());
  int64_t axis = 0;
  for (const int64_t size : sizes) {
    TORCH_CHECK(size < 0 || tensor.size(axis) == size, op, ": ", name, " has shape ",
                tensor.sizes(), "; its dimension ", axis, " must be ", size);
    ++axis;
  }
}

void check_edge_ids(const at::Tensor& edge_ids, int64_t num_edges, int64_t num_values,
                    const at::Tensor& like, const char* op) {
  TORCH_CHECK(edge_ids.dim() == 1 && edge_ids.size(0) == num_edges, op,
              ": edge_ids must be (E,) = (", num_edges, ",), got shape ", edge_ids.sizes());
  TORCH_CHECK(edge_ids.scalar_type() == at::kLong, op, ": edge_ids must be int64, got ",
              edge_ids.scalar_type());
  TORCH_CHECK(edge_ids.device() == like.device(), op, ": edge_ids are on ", edge_ids.device(),
              " but the features are on ", like.device());
  check_index_range(edge_ids, num_values, op, "the values", "edge_ids");
}

}  // namespace ttgnn

TORCH_LIBRARY_FRAGMENT(ttgnn, m) {
  // Weighted sums over each destination's in-edges, per head: out[v, h, :] = sum over the edges
  // j of v of weight[e, h] * x[indices[j], h, :], with e = edge_ids[j] when given, else j.
  // x (num_src, H, F), weight (E or more, H): (num_dst, H, F).
  m.def("csr_aggregate(Tensor indptr, Tensor indices, Tensor weight, Tensor? edge_ids, Tensor x) -> Tensor");
  // Per-edge dot products, per head: out[j, h] = <a[v, h, :], b[indices[j], h, :]> for the edges
  // j of v. a (num_dst, H, F), b (num_src, H, F): (E, H).
  m.def("csr_edge_dot(Tensor indptr, Tensor indices, Tensor a, Tensor b) -> Tensor");
  // GAT's attention: over the edges j of each destination v, the softmax of
  // leaky_relu(score_src[indices[j], h] + score_dst[v, h]). (num_src, H), (num_dst, H): (E, H).
  m.def("gat_attention(Tensor indptr, Tensor indices, Tensor score_src, Tensor score_dst, "
        "float negative_slope) -> Tensor");
  // Gradients of sum(grad * gat_attention(...)) with respect to score_src and score_dst, from the
  // forward's `attention`; t_indptr (num_src + 1,) and t_perm (E,) give the edges by source.
  m.def("gat_attention_backward(Tensor grad, Tensor attention, Tensor indptr, Tensor indices, "
        "Tensor t_indptr, Tensor t_perm, Tensor score_src, Tensor score_dst, float negative_slope) "
        "-> (Tensor, Tensor)");
}
