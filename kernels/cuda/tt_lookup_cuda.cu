// CUDA kernels of the TT lookup.
//
// The batch is deduplicated and organised level by level with ATen ops on the current stream:
// the rows are sorted (their permutation says where each unique row goes), and the unique rows
// are grouped into unique prefixes (t_0 .. t_k) for every level k, each with its parent at level
// k-1 and its children at level k+1 (contiguous, because the rows are sorted). Then
//   forward:  one block per unique prefix computes P_k = P_{k-1}[parent] @ G_k[t_k] for k = 1 ..
//             K-2 (each prefix product once), then one block per unique row computes the row
//             and writes it to every position that asked for it;
//   backward: the output gradients of each unique row are summed once; then for k = K-1 .. 1,
//             the slice gradient  dG_k[s] = sum over prefixes c with t_c = s of
//             P_{k-1}[parent_c]^T dP_k[c]  is a segmented reduction: the level's prefixes are
//             sorted by digit, one block sums a chunk of a slice's prefixes in registers into a
//             scratch row, and one block per slice adds its chunks' rows in a fixed order and
//             writes each element once (slice_segments.cuh). No atomics: where prefixes are not
//             shared, a few slices receive a contribution from almost every prefix, and one
//             atomicAdd per contribution serialised on those hot slices. The result does not
//             depend on scheduling. dP_{k-1}[p] = sum over children c of dP_k[c] G_k[t_c]^T  is a
//             plain reduction over p's contiguous children. Unique level-0 prefixes have distinct
//             digits, so their gradients are written, not added. The gradients are dense cores.
// The per-element arithmetic is shared with the CPU kernels (tt_lookup_math.h).
#include <algorithm>
#include <tuple>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "../tt_lookup.h"
#include "slice_segments.cuh"

namespace ttgnn {
namespace {

constexpr int kThreads = 128;
// Blocks per launch; the kernels stride over their items, so any count is covered.
constexpr int64_t kMaxBlocks = 65535;
// Prefixes of one slice summed by one block in the backward's segmented reduction: enough
// blocks for the GPU when a level has thousands of prefixes, a scratch of about
// (prefixes / kSliceChunk + slices) slices.
constexpr int64_t kSliceChunk = 32;

inline int blocks_for(int64_t items) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(items, kMaxBlocks)));
}

// Device pointers of the cores and of the level tables, by value.
template <typename scalar_t>
struct Tables {
  const scalar_t* core[kMaxCores];
  const int64_t* digit[kMaxCores];          // digit t_k of each unique prefix at level k
  const int64_t* parent[kMaxCores];         // index at level k-1 of each prefix at level k >= 1
  const int64_t* child_offsets[kMaxCores];  // children of prefix p at level k: level k+1
                                            // items child_offsets[k][p] .. [p + 1]
  scalar_t* partial[kMaxCores];             // P_k of each prefix at level k, 1 <= k <= K-2
};

// P_k of the prefix `item` at level k; P_0 is a slice of the first core.
template <typename scalar_t>
__device__ __forceinline__ const scalar_t* partial_of(const Tables<scalar_t>& t, const TTDims& d,
                                                      int k, int64_t item) {
  return k == 0 ? t.core[0] + t.digit[0][item] * d.slice_size(0)
                : t.partial[k] + item * d.partial_size(k);
}

template <typename scalar_t>
__global__ void partial_kernel(TTDims d, Tables<scalar_t> t, int k, int64_t count) {
  const int64_t rows = d.prefix_cols[k - 1];
  const int64_t inner = d.r[k];
  const int64_t cols = d.m[k] * d.r[k + 1];
  const int64_t size = rows * cols;
  for (int64_t p = blockIdx.x; p < count; p += gridDim.x) {
    const scalar_t* A = partial_of(t, d, k - 1, t.parent[k][p]);
    const scalar_t* B = t.core[k] + t.digit[k][p] * d.slice_size(k);
    scalar_t* C = t.partial[k] + p * size;
    for (int64_t e = threadIdx.x; e < size; e += blockDim.x) {
      C[e] = tt_matmul_elem(A, B, e / cols, e % cols, inner, cols);
    }
  }
}

template <typename scalar_t>
__global__ void rows_kernel(TTDims d, Tables<scalar_t> t, const int64_t* row_offsets,
                            const int64_t* perm, scalar_t* out, int64_t count) {
  const int last = d.num_cores - 1;
  const int64_t inner = d.r[last];
  const int64_t cols = d.m[last];
  const int64_t dim = d.dim;
  for (int64_t u = blockIdx.x; u < count; u += gridDim.x) {
    const scalar_t* A = partial_of(t, d, last - 1, t.parent[last][u]);
    const scalar_t* B = t.core[last] + t.digit[last][u] * d.slice_size(last);
    const int64_t first = row_offsets[u];
    const int64_t stop = row_offsets[u + 1];
    for (int64_t e = threadIdx.x; e < dim; e += blockDim.x) {
      const scalar_t value = tt_matmul_elem(A, B, e / cols, e % cols, inner, cols);
      for (int64_t s = first; s < stop; ++s) out[perm[s] * dim + e] = value;
    }
  }
}

// Sum of the output gradients of every position of each unique row.
template <typename scalar_t>
__global__ void gather_grad_kernel(int64_t dim, const int64_t* row_offsets, const int64_t* perm,
                                   const scalar_t* grad_out, scalar_t* grad_rows, int64_t count) {
  for (int64_t u = blockIdx.x; u < count; u += gridDim.x) {
    const int64_t first = row_offsets[u];
    const int64_t stop = row_offsets[u + 1];
    for (int64_t e = threadIdx.x; e < dim; e += blockDim.x) {
      scalar_t acc = scalar_t(0);
      for (int64_t s = first; s < stop; ++s) acc += grad_out[perm[s] * dim + e];
      grad_rows[u * dim + e] = acc;
    }
  }
}

// Partial slice gradients of level k: with the level's items sorted by digit (`order`), chunk ch
// of slice s gets scratch[ch] = sum over its items c of P_{k-1}[parent_c]^T @ dC[c], summed in
// registers (each element one thread; no atomics). `chunk_offsets[num_slices]` is the number of
// chunks; the grid strides over them.
template <typename scalar_t>
__global__ void slice_grad_chunks_kernel(TTDims d, Tables<scalar_t> t, int k, const scalar_t* dC,
                                         const int64_t* order, const int64_t* seg_offsets,
                                         const int64_t* chunk_offsets, int64_t num_slices,
                                         scalar_t* scratch) {
  const int64_t rows = d.prefix_cols[k - 1];
  const int64_t inner = d.r[k];
  const int64_t cols = d.m[k] * d.r[k + 1];
  const int64_t slice = inner * cols;
  const int64_t num_chunks = chunk_offsets[num_slices];
  for (int64_t ch = blockIdx.x; ch < num_chunks; ch += gridDim.x) {
    const SliceChunk part = slice_chunk(seg_offsets, chunk_offsets, num_slices, kSliceChunk, ch);
    for (int64_t e = threadIdx.x; e < slice; e += blockDim.x) {
      const int64_t q = e / cols;
      const int64_t j = e % cols;
      scalar_t acc = scalar_t(0);
      for (int64_t i = part.first; i < part.stop; ++i) {
        const int64_t c = order[i];
        acc += tt_matmul_tn_elem(partial_of(t, d, k - 1, t.parent[k][c]), dC + c * rows * cols, q, j,
                                 rows, inner, cols);
      }
      scratch[ch * slice + e] = acc;
    }
  }
}

// grad_core[s] = the sum of slice s's chunk rows in chunk order (zero for a slice no item uses):
// every element of the core gradient is written once.
template <typename scalar_t>
__global__ void slice_grad_reduce_kernel(int64_t slice, const int64_t* chunk_offsets, int64_t num_slices,
                                         const scalar_t* scratch, scalar_t* grad_core) {
  for (int64_t s = blockIdx.x; s < num_slices; s += gridDim.x) {
    const int64_t first = chunk_offsets[s];
    const int64_t stop = chunk_offsets[s + 1];
    for (int64_t e = threadIdx.x; e < slice; e += blockDim.x) {
      scalar_t acc = scalar_t(0);
      for (int64_t ch = first; ch < stop; ++ch) acc += scratch[ch * slice + e];
      grad_core[s * slice + e] = acc;
    }
  }
}

// dP_{k-1}[p] = sum over children c of p of dC[c] @ G_k[t_c]^T, for every prefix p at level
// k-1. At level 0 the result is the gradient of slice G_0[t_p] itself (distinct per p).
template <typename scalar_t>
__global__ void prefix_grad_kernel(TTDims d, Tables<scalar_t> t, int k, const scalar_t* dC,
                                   scalar_t* grad_partial, scalar_t* grad_core0, int64_t count) {
  const int64_t rows = d.prefix_cols[k - 1];
  const int64_t inner = d.r[k];
  const int64_t cols = d.m[k] * d.r[k + 1];
  const int64_t size = rows * inner;
  for (int64_t p = blockIdx.x; p < count; p += gridDim.x) {
    const int64_t first = t.child_offsets[k - 1][p];
    const int64_t stop = t.child_offsets[k - 1][p + 1];
    scalar_t* dst = k == 1 ? grad_core0 + t.digit[0][p] * d.slice_size(0) : grad_partial + p * size;
    for (int64_t e = threadIdx.x; e < size; e += blockDim.x) {
      scalar_t acc = scalar_t(0);
      for (int64_t c = first; c < stop; ++c) {
        acc += tt_matmul_nt_elem(dC + c * rows * cols, t.core[k] + t.digit[k][c] * d.slice_size(k),
                                 e / inner, e % inner, cols);
      }
      dst[e] = acc;
    }
  }
}

// The batch's unique rows and unique prefixes, level by level (all int64, on the device).
struct Levels {
  at::Tensor perm;         // (B,) positions in row order
  at::Tensor row_offsets;  // (U + 1,) positions of unique row u: perm[row_offsets[u] .. [u + 1])
  std::vector<at::Tensor> digits, parents, child_offsets;
  std::vector<int64_t> counts;  // unique prefixes per level (level K-1: unique rows)
};

at::Tensor offsets_from_counts(const at::Tensor& counts) {
  return at::cat({at::zeros({1}, counts.options()), counts.cumsum(0)});
}

Levels build_levels(const at::Tensor& rows, const TTDims& dims) {
  const int K = dims.num_cores;
  Levels lv;
  lv.digits.resize(K);
  lv.parents.resize(K);
  lv.child_offsets.resize(K);
  lv.counts.resize(K);
  at::Tensor sorted;
  std::tie(sorted, lv.perm) = at::sort(rows);
  at::Tensor values, unused, counts;
  std::tie(values, unused, counts) = at::unique_consecutive(sorted, false, true);
  lv.row_offsets = offsets_from_counts(counts);
  for (int k = K - 1; k >= 0; --k) {
    lv.digits[k] = at::remainder(values, dims.n[k]);
    lv.counts[k] = values.size(0);
    if (k == 0) break;
    at::Tensor prefixes, inverse, child_counts;
    std::tie(prefixes, inverse, child_counts) =
        at::unique_consecutive(at::floor_divide(values, dims.n[k]), true, true);
    lv.parents[k] = inverse;
    lv.child_offsets[k - 1] = offsets_from_counts(child_counts);
    values = prefixes;
  }
  return lv;
}

template <typename scalar_t>
Tables<scalar_t> make_tables(const std::vector<at::Tensor>& cores, const Levels& lv,
                             std::vector<at::Tensor>& partials, const TTDims& dims) {
  Tables<scalar_t> t{};
  const int K = dims.num_cores;
  partials.assign(K, at::Tensor());
  for (int k = 0; k < K; ++k) {
    t.core[k] = cores[k].const_data_ptr<scalar_t>();
    t.digit[k] = lv.digits[k].const_data_ptr<int64_t>();
    t.parent[k] = k > 0 ? lv.parents[k].const_data_ptr<int64_t>() : nullptr;
    t.child_offsets[k] = k + 1 < K ? lv.child_offsets[k].const_data_ptr<int64_t>() : nullptr;
    if (k >= 1 && k + 1 < K) {
      partials[k] = at::empty({lv.counts[k], dims.partial_size(k)}, cores[0].options());
      t.partial[k] = partials[k].mutable_data_ptr<scalar_t>();
    } else {
      t.partial[k] = nullptr;
    }
  }
  return t;
}

// Level k's items grouped by slice: the items in digit order, where each slice's items start in
// that order, and where each slice's chunks start (int64, on the device).
struct SliceSegments {
  at::Tensor order, seg_offsets, chunk_offsets;
  int64_t max_chunks;  // an upper bound of chunk_offsets[n_k], known on the host
};

SliceSegments segment_by_slice(const at::Tensor& digits, int64_t num_slices) {
  SliceSegments seg;
  at::Tensor sorted;
  std::tie(sorted, seg.order) = at::sort(digits, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor counts = at::bincount(digits, /*weights=*/{}, /*minlength=*/num_slices);
  seg.seg_offsets = offsets_from_counts(counts);
  seg.chunk_offsets = offsets_from_counts(at::floor_divide(counts.add(kSliceChunk - 1), kSliceChunk));
  // sum over slices of ceil(count / chunk) <= ceil(items / chunk) + slices
  seg.max_chunks = (digits.numel() + kSliceChunk - 1) / kSliceChunk + num_slices;
  return seg;
}

template <typename scalar_t>
void launch_partials(const TTDims& dims, const Tables<scalar_t>& t, const Levels& lv,
                     cudaStream_t stream) {
  for (int k = 1; k + 1 < dims.num_cores; ++k) {
    partial_kernel<scalar_t><<<blocks_for(lv.counts[k]), kThreads, 0, stream>>>(dims, t, k,
                                                                                lv.counts[k]);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

at::Tensor tt_lookup_cuda(const std::vector<at::Tensor>& cores_in, const at::Tensor& rows_in) {
  const char* op = "ttgnn::tt_lookup";
  const TTDims dims = check_lookup_inputs(cores_in, rows_in, op);
  const c10::cuda::CUDAGuard guard(rows_in.device());
  const auto cores = contiguous_cores(cores_in);
  const auto rows = rows_in.to(at::kLong).contiguous();
  const int64_t batch = rows.numel();
  at::Tensor out = at::empty({batch, dims.dim}, cores[0].options());
  if (batch == 0) return out;
  check_rows_in_range(rows, dims, op);
  const Levels lv = build_levels(rows, dims);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "tt_lookup_cuda", [&] {
    std::vector<at::Tensor> partials;
    const auto t = make_tables<scalar_t>(cores, lv, partials, dims);
    launch_partials(dims, t, lv, stream);
    const int64_t unique = lv.counts[dims.num_cores - 1];
    rows_kernel<scalar_t><<<blocks_for(unique), kThreads, 0, stream>>>(
        dims, t, lv.row_offsets.const_data_ptr<int64_t>(), lv.perm.const_data_ptr<int64_t>(),
        out.mutable_data_ptr<scalar_t>(), unique);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

std::vector<at::Tensor> tt_lookup_backward_cuda(const at::Tensor& grad_out_in,
                                                const std::vector<at::Tensor>& cores_in,
                                                const at::Tensor& rows_in) {
  const char* op = "ttgnn::tt_lookup_backward";
  const TTDims dims = check_lookup_inputs(cores_in, rows_in, op);
  check_grad_output(grad_out_in, rows_in, dims, cores_in[0], op);
  const c10::cuda::CUDAGuard guard(rows_in.device());
  const auto cores = contiguous_cores(cores_in);
  const auto rows = rows_in.to(at::kLong).contiguous();
  const auto grad_out = grad_out_in.contiguous();
  const int K = dims.num_cores;
  std::vector<at::Tensor> grads;
  for (const auto& core : cores) grads.push_back(at::zeros(core.sizes(), core.options()));
  if (rows.numel() == 0) return grads;
  check_rows_in_range(rows, dims, op);
  const Levels lv = build_levels(rows, dims);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(grad_out.scalar_type(), "tt_lookup_backward_cuda", [&] {
    std::vector<at::Tensor> partials;
    const auto t = make_tables<scalar_t>(cores, lv, partials, dims);
    launch_partials(dims, t, lv, stream);
    const int64_t unique = lv.counts[K - 1];
    // dC of the deepest level: the summed output gradient of each unique row.
    at::Tensor grad_level = at::empty({unique, dims.dim}, grad_out.options());
    gather_grad_kernel<scalar_t><<<blocks_for(unique), kThreads, 0, stream>>>(
        dims.dim, lv.row_offsets.const_data_ptr<int64_t>(), lv.perm.const_data_ptr<int64_t>(),
        grad_out.const_data_ptr<scalar_t>(), grad_level.mutable_data_ptr<scalar_t>(), unique);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    for (int k = K - 1; k >= 1; --k) {
      const SliceSegments seg = segment_by_slice(lv.digits[k], dims.n[k]);
      const int64_t slice = dims.slice_size(k);
      at::Tensor scratch = at::empty({seg.max_chunks, slice}, grad_out.options());
      slice_grad_chunks_kernel<scalar_t><<<blocks_for(seg.max_chunks), kThreads, 0, stream>>>(
          dims, t, k, grad_level.const_data_ptr<scalar_t>(), seg.order.const_data_ptr<int64_t>(),
          seg.seg_offsets.const_data_ptr<int64_t>(), seg.chunk_offsets.const_data_ptr<int64_t>(), dims.n[k],
          scratch.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      slice_grad_reduce_kernel<scalar_t><<<blocks_for(dims.n[k]), kThreads, 0, stream>>>(
          slice, seg.chunk_offsets.const_data_ptr<int64_t>(), dims.n[k], scratch.const_data_ptr<scalar_t>(),
          grads[k].mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      at::Tensor grad_parent;
      if (k >= 2) grad_parent = at::empty({lv.counts[k - 1], dims.partial_size(k - 1)}, grad_out.options());
      prefix_grad_kernel<scalar_t><<<blocks_for(lv.counts[k - 1]), kThreads, 0, stream>>>(
          dims, t, k, grad_level.const_data_ptr<scalar_t>(),
          k >= 2 ? grad_parent.mutable_data_ptr<scalar_t>() : nullptr,
          grads[0].mutable_data_ptr<scalar_t>(), lv.counts[k - 1]);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      grad_level = grad_parent;
    }
  });
  return grads;
}

}  // namespace
}  // namespace ttgnn

TORCH_LIBRARY_IMPL(ttgnn, CUDA, m) {
  m.impl("tt_lookup", &ttgnn::tt_lookup_cuda);
  m.impl("tt_lookup_backward", &ttgnn::tt_lookup_backward_cuda);
}
