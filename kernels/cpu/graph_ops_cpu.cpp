// CPU kernels of the graph ops (schemas: kernels/graph_ops.cpp).
//
// Every kernel walks destinations (or, for the gradient of source scores, sources) and writes
// only that node's outputs, so threads never share an output and no atomics are needed; each
// sum is taken in edge order by one thread, so results do not depend on the thread count.
// Threads take contiguous pieces of nodes of about equal cost (edges plus nodes).
//
// Compared with torch's CSR product one head at a time, the aggregation reads each source's
// (H, F) row once for all heads and needs no per-head copies of the features; the attention op
// fuses the score gathers, the leaky ReLU and the softmax over each destination's edges (torch's
// version is a scatter-max, exp, scatter-add and division over all edges).
//
// Rows of sources are read in the graph's random order, so each loop prefetches the rows it will
// read kPrefetchEdges edges ahead (about 1.4x on ogbn-arxiv's aggregation, one thread).
//
// The loops are compiled once per instruction-set path (cpu/cpu_isa.h), as the TT-lookup
// kernels are: one entry function per path carries the target flags and inlines the loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "../graph_ops.h"
#include "../tt_lookup_math.h"
#include "tt_lookup_cpu_tuning.h"

namespace ttgnn {
namespace {

constexpr int64_t kPrefetchEdges = 8;
constexpr int64_t kCacheLine = 64;

// Prefetches `bytes` from `p` into the cache, one line at a time.
TT_INLINE void prefetch_bytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += kCacheLine) __builtin_prefetch(c + b);
}

// Node pieces of about equal cost, cost(v) = edges of v + 1: `pieces + 1` boundaries.
std::vector<int64_t> balanced_pieces(const int64_t* indptr, int64_t num_nodes, int64_t pieces) {
  std::vector<int64_t> bounds(pieces + 1, num_nodes);
  bounds[0] = 0;
  const int64_t total = indptr[num_nodes] + num_nodes;
  int64_t node = 0;
  for (int64_t p = 1; p < pieces; ++p) {
    const int64_t target = total * p / pieces;
    // the first node whose cumulative cost (indptr[v] + v) reaches the target
    int64_t lo = node, hi = num_nodes;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (indptr[mid] + mid < target) lo = mid + 1; else hi = mid;
    }
    node = lo;
    bounds[p] = node;
  }
  return bounds;
}

// Runs body(begin, end) over pieces of [0, num_nodes) on torch's intra-op threads.
template <class Body>
void for_each_piece(const int64_t* indptr, int64_t num_nodes, const Body& body) {
  if (num_nodes == 0) return;
  const int64_t pieces = std::max<int64_t>(1, std::min<int64_t>(num_nodes, 8 * at::get_num_threads()));
  const std::vector<int64_t> bounds = balanced_pieces(indptr, num_nodes, pieces);
  at::parallel_for(0, pieces, 1, [&](int64_t first, int64_t last) {
    for (int64_t p = first; p < last; ++p) {
      if (bounds[p] < bounds[p + 1]) body(bounds[p], bounds[p + 1]);
    }
  });
}

// ------------------------------------------------------------------ the loops

template <typename T>
struct AggregateArgs {
  const int64_t* indptr;
  const int64_t* indices;
  const int64_t* edge_ids;  // nullptr: edge j has weight row j
  const T* weight;          // (E', H)
  const T* x;               // (num_src, H, F)
  T* out;                   // (num_dst, H, F)
  int64_t heads;
  int64_t width;            // F
  int64_t num_edges;        // E
};

template <typename T>
TT_INLINE void aggregate_range(const AggregateArgs<T>& a, int64_t begin, int64_t end) {
  const int64_t heads = a.heads, width = a.width, row = heads * width;
  for (int64_t v = begin; v < end; ++v) {
    T* out = a.out + v * row;
    std::fill(out, out + row, T(0));
    for (int64_t j = a.indptr[v]; j < a.indptr[v + 1]; ++j) {
      if (j + kPrefetchEdges < a.num_edges) {
        prefetch_bytes(a.x + a.indices[j + kPrefetchEdges] * row, row * int64_t(sizeof(T)));
        if (a.edge_ids) __builtin_prefetch(a.weight + a.edge_ids[j + kPrefetchEdges] * heads);
      }
      const T* x = a.x + a.indices[j] * row;
      const T* w = a.weight + (a.edge_ids ? a.edge_ids[j] : j) * heads;
      for (int64_t h = 0; h < heads; ++h) {
        const T coef = w[h];
        T* o = out + h * width;
        const T* xs = x + h * width;
#pragma omp simd
        for (int64_t f = 0; f < width; ++f) o[f] += coef * xs[f];
      }
    }
  }
}

template <typename T>
struct EdgeDotArgs {
  const int64_t* indptr;
  const int64_t* indices;
  const T* a;  // (num_dst, H, F)
  const T* b;  // (num_src, H, F)
  T* out;      // (E, H)
  int64_t heads;
  int64_t width;
  int64_t num_edges;
};

template <typename T>
TT_INLINE void edge_dot_range(const EdgeDotArgs<T>& d, int64_t begin, int64_t end) {
  const int64_t heads = d.heads, width = d.width, row = heads * width;
  for (int64_t v = begin; v < end; ++v) {
    const T* a = d.a + v * row;
    for (int64_t j = d.indptr[v]; j < d.indptr[v + 1]; ++j) {
      if (j + kPrefetchEdges < d.num_edges) {
        prefetch_bytes(d.b + d.indices[j + kPrefetchEdges] * row, row * int64_t(sizeof(T)));
      }
      const T* b = d.b + d.indices[j] * row;
      for (int64_t h = 0; h < heads; ++h) {
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t f = 0; f < width; ++f) sum += a[h * width + f] * b[h * width + f];
        d.out[j * heads + h] = sum;
      }
    }
  }
}

template <typename T>
TT_INLINE T leaky_relu(T value, T slope) {
  return value > T(0) ? value : value * slope;
}

template <typename T>
struct AttentionArgs {
  const int64_t* indptr;
  const int64_t* indices;
  const T* score_src;  // (num_src, H)
  const T* score_dst;  // (num_dst, H)
  T* out;              // (E, H)
  int64_t heads;
  T slope;
  int64_t num_edges;
};

template <typename T>
TT_INLINE void attention_range(const AttentionArgs<T>& a, int64_t begin, int64_t end, T* peak, T* total) {
  const int64_t heads = a.heads;
  for (int64_t v = begin; v < end; ++v) {
    const int64_t lo = a.indptr[v], hi = a.indptr[v + 1];
    if (lo == hi) continue;
    const T* dst = a.score_dst + v * heads;
    std::fill(peak, peak + heads, -std::numeric_limits<T>::infinity());
    std::fill(total, total + heads, T(0));
    for (int64_t j = lo; j < hi; ++j) {
      if (j + kPrefetchEdges < a.num_edges) __builtin_prefetch(a.score_src + a.indices[j + kPrefetchEdges] * heads);
      const T* src = a.score_src + a.indices[j] * heads;
      T* out = a.out + j * heads;
      for (int64_t h = 0; h < heads; ++h) {
        out[h] = leaky_relu(src[h] + dst[h], a.slope);
        peak[h] = std::max(peak[h], out[h]);
      }
    }
    for (int64_t j = lo; j < hi; ++j) {
      T* out = a.out + j * heads;
      for (int64_t h = 0; h < heads; ++h) {
        out[h] = std::exp(out[h] - peak[h]);
        total[h] += out[h];
      }
    }
    for (int64_t j = lo; j < hi; ++j) {
      T* out = a.out + j * heads;
      for (int64_t h = 0; h < heads; ++h) out[h] /= total[h];
    }
  }
}

template <typename T>
struct AttentionBackwardArgs {
  const int64_t* indptr;
  const int64_t* indices;
  const int64_t* t_indptr;
  const int64_t* t_perm;
  const T* grad;       // (E, H)
  const T* attention;  // (E, H)
  const T* score_src;  // (num_src, H)
  const T* score_dst;  // (num_dst, H)
  T* grad_edge;        // (E, H): the gradient of each edge's score before the leaky ReLU
  T* grad_src;         // (num_src, H)
  T* grad_dst;         // (num_dst, H)
  int64_t heads;
  T slope;
  int64_t num_edges;
};

// Per destination: the softmax's gradient (a * (g - sum of a * g over the edges)) through the
// leaky ReLU, kept per edge, and summed into the destination's score.
template <typename T>
TT_INLINE void attention_backward_dst_range(const AttentionBackwardArgs<T>& a, int64_t begin, int64_t end,
                                            T* dot) {
  const int64_t heads = a.heads;
  for (int64_t v = begin; v < end; ++v) {
    const int64_t lo = a.indptr[v], hi = a.indptr[v + 1];
    T* grad_dst = a.grad_dst + v * heads;
    std::fill(grad_dst, grad_dst + heads, T(0));
    std::fill(dot, dot + heads, T(0));
    for (int64_t j = lo; j < hi; ++j) {
      for (int64_t h = 0; h < heads; ++h) dot[h] += a.attention[j * heads + h] * a.grad[j * heads + h];
    }
    const T* dst = a.score_dst + v * heads;
    for (int64_t j = lo; j < hi; ++j) {
      const T* src = a.score_src + a.indices[j] * heads;
      for (int64_t h = 0; h < heads; ++h) {
        const T e = a.attention[j * heads + h] * (a.grad[j * heads + h] - dot[h]);
        const T g = src[h] + dst[h] > T(0) ? e : e * a.slope;
        a.grad_edge[j * heads + h] = g;
        grad_dst[h] += g;
      }
    }
  }
}

// Per source: the sum of its out-edges' gradients (edges by source: t_perm[t_indptr[u] ..]).
template <typename T>
TT_INLINE void attention_backward_src_range(const AttentionBackwardArgs<T>& a, int64_t begin, int64_t end) {
  const int64_t heads = a.heads;
  for (int64_t u = begin; u < end; ++u) {
    T* grad_src = a.grad_src + u * heads;
    std::fill(grad_src, grad_src + heads, T(0));
    for (int64_t j = a.t_indptr[u]; j < a.t_indptr[u + 1]; ++j) {
      if (j + kPrefetchEdges < a.num_edges) __builtin_prefetch(a.grad_edge + a.t_perm[j + kPrefetchEdges] * heads);
      const T* g = a.grad_edge + a.t_perm[j] * heads;
      for (int64_t h = 0; h < heads; ++h) grad_src[h] += g[h];
    }
  }
}

// ------------------------------------------------------------------ per-path entry points

template <class Isa>
struct GraphPath;

#define TT_DEFINE_GRAPH_PATH(ISA, TARGET)                                                         \
  template <>                                                                                     \
  struct GraphPath<ISA> {                                                                         \
    template <typename T>                                                                         \
    TARGET static void aggregate(const AggregateArgs<T>& a, int64_t begin, int64_t end) {         \
      aggregate_range(a, begin, end);                                                             \
    }                                                                                             \
    template <typename T>                                                                         \
    TARGET static void edge_dot(const EdgeDotArgs<T>& d, int64_t begin, int64_t end) {            \
      edge_dot_range(d, begin, end);                                                              \
    }                                                                                             \
    template <typename T>                                                                         \
    TARGET static void attention(const AttentionArgs<T>& a, int64_t begin, int64_t end, T* peak,  \
                                 T* total) {                                                      \
      attention_range(a, begin, end, peak, total);                                                \
    }                                                                                             \
    template <typename T>                                                                         \
    TARGET static void attention_backward_dst(const AttentionBackwardArgs<T>& a, int64_t begin,   \
                                              int64_t end, T* dot) {                              \
      attention_backward_dst_range(a, begin, end, dot);                                           \
    }                                                                                             \
    template <typename T>                                                                         \
    TARGET static void attention_backward_src(const AttentionBackwardArgs<T>& a, int64_t begin,   \
                                              int64_t end) {                                      \
      attention_backward_src_range(a, begin, end);                                                \
    }                                                                                             \
  };

#if TT_CPU_MULTI_ISA
TT_DEFINE_GRAPH_PATH(IsaAvx512, TT_TARGET_AVX512)
TT_DEFINE_GRAPH_PATH(IsaAvx2, TT_TARGET_AVX2)
#endif
TT_DEFINE_GRAPH_PATH(IsaBaseline, )

// Calls fn.template operator()<Path>() with the entry functions of the active path.
template <class Fn>
void with_active_path(const Fn& fn) {
  switch (cpu_isa_active()) {
#if TT_CPU_MULTI_ISA
    case CpuIsa::kAvx512: fn(GraphPath<IsaAvx512>{}); return;
    case CpuIsa::kAvx2: fn(GraphPath<IsaAvx2>{}); return;
#endif
    default: fn(GraphPath<IsaBaseline>{}); return;
  }
}

// ------------------------------------------------------------------ the ops

at::Tensor csr_aggregate_cpu(const at::Tensor& indptr_in, const at::Tensor& indices_in,
                             const at::Tensor& weight_in, const c10::optional<at::Tensor>& edge_ids_in,
                             const at::Tensor& x_in) {
  const char* op = "ttgnn::csr_aggregate";
  check_values(x_in, "x", 3, {}, x_in, op);
  const int64_t heads = x_in.size(1), width = x_in.size(2);
  const CsrDims dims = check_csr(indptr_in, indices_in, x_in.size(0), op, "the graph");
  check_values(weight_in, "weight", 2, {-1, heads}, x_in, op);
  const bool has_ids = edge_ids_in.has_value() && edge_ids_in->defined();
  if (has_ids) {
    check_edge_ids(*edge_ids_in, dims.num_edges, weight_in.size(0), x_in, op);
  } else {
    TORCH_CHECK(weight_in.size(0) == dims.num_edges, op, ": weight must have one row per edge (",
                dims.num_edges, "), got shape ", weight_in.sizes());
  }
  const auto indptr = indptr_in.contiguous(), indices = indices_in.contiguous();
  const auto weight = weight_in.contiguous(), x = x_in.contiguous();
  const auto edge_ids = has_ids ? edge_ids_in->contiguous() : at::Tensor();
  auto out = at::empty({dims.num_dst, heads, width}, x.options());
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "csr_aggregate_cpu", [&] {
    const AggregateArgs<scalar_t> args{indptr.data_ptr<int64_t>(), indices.data_ptr<int64_t>(),
                                       has_ids ? edge_ids.data_ptr<int64_t>() : nullptr,
                                       weight.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                       out.data_ptr<scalar_t>(), heads, width, dims.num_edges};
    with_active_path([&](auto path) {
      for_each_piece(args.indptr, dims.num_dst, [&](int64_t begin, int64_t end) {
        path.template aggregate<scalar_t>(args, begin, end);
      });
    });
  });
  return out;
}

at::Tensor csr_edge_dot_cpu(const at::Tensor& indptr_in, const at::Tensor& indices_in, const at::Tensor& a_in,
                            const at::Tensor& b_in) {
  const char* op = "ttgnn::csr_edge_dot";
  check_values(b_in, "b", 3, {}, b_in, op);
  const int64_t heads = b_in.size(1), width = b_in.size(2);
  const CsrDims dims = check_csr(indptr_in, indices_in, b_in.size(0), op, "the graph");
  check_values(a_in, "a", 3, {dims.num_dst, heads, width}, b_in, op);
  const auto indptr = indptr_in.contiguous(), indices = indices_in.contiguous();
  const auto a = a_in.contiguous(), b = b_in.contiguous();
  auto out = at::empty({dims.num_edges, heads}, b.options());
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "csr_edge_dot_cpu", [&] {
    const EdgeDotArgs<scalar_t> args{indptr.data_ptr<int64_t>(), indices.data_ptr<int64_t>(),
                                     a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                                     out.data_ptr<scalar_t>(), heads, width, dims.num_edges};
    with_active_path([&](auto path) {
      for_each_piece(args.indptr, dims.num_dst, [&](int64_t begin, int64_t end) {
        path.template edge_dot<scalar_t>(args, begin, end);
      });
    });
  });
  return out;
}

at::Tensor gat_attention_cpu(const at::Tensor& indptr_in, const at::Tensor& indices_in,
                             const at::Tensor& score_src_in, const at::Tensor& score_dst_in,
                             double negative_slope) {
  const char* op = "ttgnn::gat_attention";
  check_values(score_src_in, "score_src", 2, {}, score_src_in, op);
  const int64_t heads = score_src_in.size(1);
  const CsrDims dims = check_csr(indptr_in, indices_in, score_src_in.size(0), op, "the graph");
  check_values(score_dst_in, "score_dst", 2, {dims.num_dst, heads}, score_src_in, op);
  const auto indptr = indptr_in.contiguous(), indices = indices_in.contiguous();
  const auto score_src = score_src_in.contiguous(), score_dst = score_dst_in.contiguous();
  auto out = at::empty({dims.num_edges, heads}, score_src.options());
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(score_src.scalar_type(), "gat_attention_cpu", [&] {
    const AttentionArgs<scalar_t> args{indptr.data_ptr<int64_t>(), indices.data_ptr<int64_t>(),
                                       score_src.data_ptr<scalar_t>(), score_dst.data_ptr<scalar_t>(),
                                       out.data_ptr<scalar_t>(), heads, static_cast<scalar_t>(negative_slope),
                                       dims.num_edges};
    with_active_path([&](auto path) {
      for_each_piece(args.indptr, dims.num_dst, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> scratch(2 * heads);
        path.template attention<scalar_t>(args, begin, end, scratch.data(), scratch.data() + heads);
      });
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> gat_attention_backward_cpu(
    const at::Tensor& grad_in, const at::Tensor& attention_in, const at::Tensor& indptr_in,
    const at::Tensor& indices_in, const at::Tensor& t_indptr_in, const at::Tensor& t_perm_in,
    const at::Tensor& score_src_in, const at::Tensor& score_dst_in, double negative_slope) {
  const char* op = "ttgnn::gat_attention_backward";
  check_values(score_src_in, "score_src", 2, {}, score_src_in, op);
  const int64_t heads = score_src_in.size(1);
  const CsrDims dims = check_csr(indptr_in, indices_in, score_src_in.size(0), op, "the graph");
  const CsrDims t_dims = check_csr(t_indptr_in, t_perm_in, dims.num_edges, op, "the transpose");
  TORCH_CHECK(t_dims.num_dst == dims.num_src && t_dims.num_edges == dims.num_edges, op,
              ": the transpose must have ", dims.num_src, " sources and ", dims.num_edges,
              " edges, got ", t_dims.num_dst, " and ", t_dims.num_edges);
  check_values(score_dst_in, "score_dst", 2, {dims.num_dst, heads}, score_src_in, op);
  check_values(grad_in, "grad", 2, {dims.num_edges, heads}, score_src_in, op);
  check_values(attention_in, "attention", 2, {dims.num_edges, heads}, score_src_in, op);
  const auto indptr = indptr_in.contiguous(), indices = indices_in.contiguous();
  const auto t_indptr = t_indptr_in.contiguous(), t_perm = t_perm_in.contiguous();
  const auto score_src = score_src_in.contiguous(), score_dst = score_dst_in.contiguous();
  const auto grad = grad_in.contiguous(), attention = attention_in.contiguous();
  if (dims.num_edges == 0 || heads == 0) {
    return {at::zeros({dims.num_src, heads}, score_src.options()),
            at::zeros({dims.num_dst, heads}, score_src.options())};
  }
  // every row of both is written by the walks below (nodes without edges get zeros there)
  auto grad_src = at::empty({dims.num_src, heads}, score_src.options());
  auto grad_dst = at::empty({dims.num_dst, heads}, score_src.options());
  auto grad_edge = at::empty({dims.num_edges, heads}, score_src.options());
  AT_DISPATCH_FLOATING_TYPES(score_src.scalar_type(), "gat_attention_backward_cpu", [&] {
    const AttentionBackwardArgs<scalar_t> args{
        indptr.data_ptr<int64_t>(), indices.data_ptr<int64_t>(), t_indptr.data_ptr<int64_t>(),
        t_perm.data_ptr<int64_t>(), grad.data_ptr<scalar_t>(), attention.data_ptr<scalar_t>(),
        score_src.data_ptr<scalar_t>(), score_dst.data_ptr<scalar_t>(), grad_edge.data_ptr<scalar_t>(),
        grad_src.data_ptr<scalar_t>(), grad_dst.data_ptr<scalar_t>(), heads,
        static_cast<scalar_t>(negative_slope), dims.num_edges};
    with_active_path([&](auto path) {
      for_each_piece(args.indptr, dims.num_dst, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> dot(heads);
        path.template attention_backward_dst<scalar_t>(args, begin, end, dot.data());
      });
      for_each_piece(args.t_indptr, dims.num_src, [&](int64_t begin, int64_t end) {
        path.template attention_backward_src<scalar_t>(args, begin, end);
      });
    });
  });
  return {grad_src, grad_dst};
}

}  // namespace
}  // namespace ttgnn

TORCH_LIBRARY_IMPL(ttgnn, CPU, m) {
  m.impl("csr_aggregate", &ttgnn::csr_aggregate_cpu);
  m.impl("csr_edge_dot", &ttgnn::csr_edge_dot_cpu);
  m.impl("gat_attention", &ttgnn::gat_attention_cpu);
  m.impl("gat_attention_backward", &ttgnn::gat_attention_backward_cpu);
}
