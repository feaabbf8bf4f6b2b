// Declarations shared by the graph op schemas (graph_ops.cpp) and their CPU kernels.
//
// The ops compute GNN message passing on a graph stored by destination (CSR): the in-edges of
// destination v are j = indptr[v] .. indptr[v + 1] - 1, their sources indices[j]. Features carry
// a head dimension, (nodes, H, F), as multi-head attention has it (H = 1 otherwise).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace ttgnn {

struct CsrDims {
  int64_t num_dst;
  int64_t num_src;
  int64_t num_edges;
};

// Validates a CSR structure: `indptr` (num_dst + 1,) and `indices` (E,), int64, 1-D, one device;
// indptr from 0 to E and non-decreasing; every index in [0, num_src). `what` names the structure
// ("the graph", "the transpose") in error messages.
CsrDims check_csr(const at::Tensor& indptr, const at::Tensor& indices, int64_t num_src,
                  const char* op, const char* what);

// Validates a floating-point tensor of `dim` dimensions whose leading sizes are `sizes` (-1: any)
// and whose dtype and device are those of `like`.
void check_values(const at::Tensor& tensor, const char* name, int64_t dim,
                  std::initializer_list<int64_t> sizes, const at::Tensor& like, const char* op);

// Validates optional edge ids (E,) int64 with values in [0, num_values).
void check_edge_ids(const at::Tensor& edge_ids, int64_t num_edges, int64_t num_values,
                    const at::Tensor& like, const char* op);

}  // namespace ttgnn
