// CPU kernels of the TT lookup (OpenMP).
//
// Both passes start by sorting the batch's rows (LSD radix sort of (row, position) pairs), which
// deduplicates them: each unique row is computed once and copied to every position that asked
// for it (forward), or the output gradients of its positions are summed once (backward).
// Positions are scattered over the output, so a large output is written with streaming stores,
// which skip reading each scattered line from memory before overwriting it.
//
// Sorted rows that share leading digits are adjacent, so the unique rows are walked depth first:
// threads take contiguous chunks of them (dynamically in the forward, round-robin in the backward,
// whose per-thread sums must not depend on timing) and keep one partial product P_k per level;
// a row recomputes only the levels from its first digit that differs from the previous row's. The
// prefix (t_0 .. t_k) product is thus computed once per unique prefix (plus once per chunk
// boundary). The last core's step is tiled (see tt_lookup_math.h) so that it vectorises.
//
// The backward walk mirrors it: the gradient of P_k is accumulated while the prefix stays the
// same and flushed into the gradient of slice G_k[t_k] and of P_{k-1} when it changes, so each
// unique slice receives one accumulation per unique prefix, into a dense gradient buffer per
// thread (cores are small; threads are summed at the end). No per-row copy of any core. The
// output gradients a block of unique rows needs are scattered over the batch: they are gathered
// (and summed per row) first, in a loop of loads alone that keeps many in flight, and the walk
// then reads them from the cache.
//
// Where sorted rows share few prefixes (a large table, rows from all over it), the prefix
// products are not shared and contracting each row from its last core instead takes fewer
// multiply-adds (see "right to left" below). Each window of sorted unique rows takes the order
// that costs it fewer multiply-adds, from how many distinct prefixes it has (contraction.h).
//
// The walks are compiled once per instruction-set path (cpu_isa.h): each path's entry functions
// carry its target flags and inline the walk and its products, with block sizes and distances
// of that path (tt_lookup_cpu_tuning.h); a call runs the entries of the active path.

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define TT_HAVE_STREAMING_STORES 1
#endif

#include "../tt_lookup.h"
#include "contraction.h"
#include "cpu_isa.h"
#include "tt_lookup_cpu_math.h"
#include "tt_lookup_cpu_tuning.h"

namespace ttgnn {
namespace cpu {

// The row combinations of each path (see path_row_combinations in tt_lookup_cpu_math.h).
#define TT_DEFINE_PATH_ROW_COMBINATIONS(ISA, TARGET, T)                                          \
  template <>                                                                                   \
  TARGET __attribute__((noinline)) void path_row_combinations<ISA, T>(                         \
      const T* X, const T* M, T* out, int64_t rows, int64_t terms, int64_t width, int64_t xr,    \
      int64_t xk, bool accumulate) {                                                            \
    row_combinations<ISA>(X, M, out, rows, terms, width, xr, xk, accumulate);                   \
  }

#if TT_CPU_MULTI_ISA
TT_DEFINE_PATH_ROW_COMBINATIONS(IsaAvx512, TT_TARGET_AVX512, float)
TT_DEFINE_PATH_ROW_COMBINATIONS(IsaAvx512, TT_TARGET_AVX512, double)
TT_DEFINE_PATH_ROW_COMBINATIONS(IsaAvx2, TT_TARGET_AVX2, float)
TT_DEFINE_PATH_ROW_COMBINATIONS(IsaAvx2, TT_TARGET_AVX2, double)
#endif
TT_DEFINE_PATH_ROW_COMBINATIONS(IsaBaseline, , float)
TT_DEFINE_PATH_ROW_COMBINATIONS(IsaBaseline, , double)

}  // namespace cpu

namespace {

using cpu::matmul;
using cpu::matmul_acc;
using cpu::matmul_nt_acc;
using cpu::matmul_t;
using cpu::matmul_tn_acc;
using cpu::matmul_tn_acc_transposed;

// Fewest unique rows worth a thread of its own.
constexpr int64_t kMinRowsPerThread = 256;
// Unique rows per chunk of work. The forward's threads take chunks dynamically, so a thread the
// OS deschedules (shared machines) does not hold the others up; each chunk restarts the walk,
// which costs one recomputation of the prefix products.
constexpr int64_t kRowsPerChunk = 2048;

// A grow-only scratch buffer per thread (and per use `kTag`). Buffers of a batch's size are past
// malloc's mmap threshold: allocated afresh, every call would fault their pages in again.
template <typename T, int kTag>
std::vector<T>& workspace() {
  thread_local std::vector<T> buffer;
  return buffer;
}

// The batch's rows, deduplicated and sorted, with the positions that asked for each.
struct SortedRows {
  std::vector<int64_t> unique_rows;  // (U,) ascending
  std::vector<int64_t> offsets;      // (U + 1,): positions of unique row u are
  std::vector<int64_t> positions;    //   positions[offsets[u] .. offsets[u + 1])
};

// The rows of this thread's last sort, to recognise the same batch again: the backward of a
// lookup gets the rows its forward sorted, and comparing them costs a small fraction of sorting.
struct LastSort {
  std::vector<int64_t> rows;
  int64_t num_rows = -1;
  bool valid = false;
};

template <typename index_t>
bool same_rows(const LastSort& last, const index_t* rows, int64_t batch, int64_t num_rows) {
  if (!last.valid || last.num_rows != num_rows || static_cast<int64_t>(last.rows.size()) != batch) {
    return false;
  }
  const int64_t* seen = last.rows.data();
  int64_t differ = 0;
  TT_SIMD
  for (int64_t i = 0; i < batch; ++i) differ |= seen[i] ^ static_cast<int64_t>(rows[i]);
  return differ == 0;
}

// Sorts `rows` (checking each is in [0, num_rows)) and groups equal rows.
template <typename index_t>
const SortedRows& sort_rows(const index_t* rows, int64_t batch, int64_t num_rows,
                           const char* op) {
  // Reused across calls on this thread (the result too: valid until the next call), and
  // returned as it is when this call's rows equal the last call's.
  thread_local SortedRows out;
  thread_local LastSort last;
  if (same_rows(last, rows, batch, num_rows)) return out;
  last.valid = false;  // until this sort completes (a bad row throws below)
  auto& keys = workspace<uint64_t, 0>();
  auto& keys_tmp = workspace<uint64_t, 1>();
  auto& pos_tmp = workspace<int64_t, 2>();
  keys.resize(batch);
  keys_tmp.resize(batch);
  pos_tmp.resize(batch);
  out.positions.resize(batch);
  uint64_t max_key = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t row = static_cast<int64_t>(rows[i]);
    TORCH_CHECK(row >= 0 && row < num_rows, op, ": row ", row, " at position ", i,
                " is out of range for a TT table with ", num_rows, " rows (valid: 0 to ",
                num_rows - 1, ")");
    keys[i] = static_cast<uint64_t>(row);
    out.positions[i] = i;
    max_key = std::max<uint64_t>(max_key, keys[i]);
  }
  int key_bits = 0;
  while (key_bits < 64 && (max_key >> key_bits) != 0) ++key_bits;
  // As few passes of at most 11 bits as cover the keys, each of about equal width.
  const int passes = (key_bits + 10) / 11;
  const int digit_bits = passes > 0 ? (key_bits + passes - 1) / passes : 0;
  const uint64_t buckets = uint64_t(1) << digit_bits;
  auto& count = workspace<int64_t, 3>();
  count.resize(buckets);
  for (int p = 0; p < passes; ++p) {
    const int shift = p * digit_bits;
    const uint64_t mask = buckets - 1;
    std::fill(count.begin(), count.end(), 0);
    for (int64_t i = 0; i < batch; ++i) ++count[(keys[i] >> shift) & mask];
    int64_t total = 0;
    for (uint64_t b = 0; b < buckets; ++b) {
      const int64_t c = count[b];
      count[b] = total;
      total += c;
    }
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t dst = count[(keys[i] >> shift) & mask]++;
      keys_tmp[dst] = keys[i];
      pos_tmp[dst] = out.positions[i];
    }
    keys.swap(keys_tmp);
    out.positions.swap(pos_tmp);
  }
  out.offsets.clear();
  out.unique_rows.clear();
  out.offsets.reserve(batch + 1);
  out.unique_rows.reserve(batch);
  for (int64_t i = 0; i < batch; ++i) {
    if (i == 0 || keys[i] != keys[i - 1]) {
      out.offsets.push_back(i);
      out.unique_rows.push_back(static_cast<int64_t>(keys[i]));
    }
  }
  out.offsets.push_back(batch);
  last.rows.assign(rows, rows + batch);
  last.num_rows = num_rows;
  last.valid = true;
  return out;
}

const SortedRows& sort_rows(const at::Tensor& rows, int64_t num_rows, const char* op) {
  if (rows.scalar_type() == at::kInt) {
    return sort_rows(rows.data_ptr<int32_t>(), rows.numel(), num_rows, op);
  }
  return sort_rows(rows.data_ptr<int64_t>(), rows.numel(), num_rows, op);
}

// Threads for `num_unique` rows: at most torch's thread count, at least kMinRowsPerThread each.
int threads_for(int64_t num_unique) {
  const int64_t wanted = (num_unique + kMinRowsPerThread - 1) / kMinRowsPerThread;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), wanted)));
}

// Number of chunks of unique rows: at least one per thread.
inline int64_t chunks_for(int64_t num_unique, int threads) {
  return std::max<int64_t>(threads, (num_unique + kRowsPerChunk - 1) / kRowsPerChunk);
}

// [begin, end) of part `part` of `parts` near-equal parts of [0, total).
inline void split_range(int64_t total, int64_t part, int64_t parts, int64_t* begin,
                        int64_t* end) {
  *begin = total * part / parts;
  *end = total * (part + 1) / parts;
}

// The last core is tiled (see tt_lookup_cpu_math.h) unless its tiles would exceed this many
// scalars; past it the last step falls back to the plain product.
constexpr int64_t kMaxTileScalars = int64_t(1) << 22;

// Depth-first walk state of one thread: the current row's digits and its prefix products.
template <class Isa, typename scalar_t>
struct PrefixWalk {
  const TTDims& dims;
  const scalar_t* const* cores;
  std::vector<scalar_t> storage;
  scalar_t* partial_buf[kMaxCores];   // P_k for 1 <= k <= K-2 (P_0 is a core slice)
  const scalar_t* partial[kMaxCores]; // P_k of the current row's prefix
  int64_t digits[kMaxCores];
  int64_t prev_digits[kMaxCores];
  bool started = false;

  PrefixWalk(const TTDims& d, const scalar_t* const* c) : dims(d), cores(c) {
    int64_t total = 0;
    for (int k = 1; k + 1 < dims.num_cores; ++k) total += dims.partial_size(k);
    storage.resize(total);
    int64_t offset = 0;
    for (int k = 1; k + 1 < dims.num_cores; ++k) {
      partial_buf[k] = storage.data() + offset;
      offset += dims.partial_size(k);
    }
  }

  // Moves to `row` and returns the first level whose digit changed (0 for the first row).
  TT_INLINE int advance(int64_t row) {
    for (int k = 0; k < dims.num_cores; ++k) prev_digits[k] = digits[k];
    tt_row_digits(row, dims, digits);
    int level = 0;
    if (started) {
      while (level < dims.num_cores && digits[level] == prev_digits[level]) ++level;
    }
    started = true;
    return level;
  }

  TT_INLINE const scalar_t* slice(int k, int64_t digit) const {
    return cores[k] + digit * dims.slice_size(k);
  }

  // Recomputes P_k for the levels from `level` on (all but the last core).
  TT_INLINE void recompute(int level) {
    if (level == 0) partial[0] = slice(0, digits[0]);
    for (int k = std::max(level, 1); k + 1 < dims.num_cores; ++k) {
      matmul<Isa>(partial[k - 1], slice(k, digits[k]), partial_buf[k], dims.prefix_cols[k - 1],
                  dims.r[k], dims.m[k] * dims.r[k + 1]);
      partial[k] = partial_buf[k];
    }
  }
};

// Shapes of the last step, row (rows x cols) = P_{K-2} (rows x inner) @ slice (inner x cols).
struct LastStep {
  int last;       // K - 1
  int64_t rows;   // M_{K-2}
  int64_t inner;  // r_{K-1}
  int64_t cols;   // m_{K-1}
  int64_t dim;    // D
  int64_t period; // of the last core's tiles (cpu::tile_period)
  bool tiled;     // use the tiled form (tiles of the last core are given)
  explicit LastStep(const TTDims& dims)
      : last(dims.num_cores - 1),
        rows(dims.prefix_cols[dims.num_cores - 2]),
        inner(dims.r[dims.num_cores - 1]),
        cols(dims.m[dims.num_cores - 1]),
        dim(dims.dim),
        period(cpu::tile_period(cols, dim)),
        tiled(dims.n[dims.num_cores - 1] * inner * period <= kMaxTileScalars) {}
  int64_t tile_size() const { return inner * period; }
  int64_t spread_size() const { return inner * dim; }
};

// ------------------------------------------------------------------ right to left
//
// Where sorted rows share few prefixes (a table of hundreds of millions of rows, rows drawn
// from all over it), the left-to-right walk recomputes every level for every row, and its
// products are wide on the left: P_k costs M_{k-1} r_k m_k r_{k+1} multiply-adds. Contracting
// from the last core instead costs r_k m_k r_{k+1} W_{k+1} per level (W_k = m_k ... m_{K-1}, the
// columns of the suffix), about 1.7 times fewer for three cores of column shape (8, 4, 4). The
// suffix products are kept transposed, V_k = S_k^T, (W_k x r_k), with
//     S_k[q_k][c_k, w] = sum_q G_k[t_k][q_k][c_k][q] S_{k+1}[q][w]
//     V_{K-1} = the last core's slice transposed, (m_{K-1} x r_{K-1})
//     V_k[c_k] (W_{k+1} x r_k) = V_{k+1} (W_{k+1} x r_{k+1}) @ CT_k[t_k][c_k] (r_{k+1} x r_k)
//     row^T (W_1 x m_0) = V_1 (W_1 x r_1) @ G_0[t_0]^T (r_1 x m_0)
// where CT_k[t][c] is block c of the transposed slice, (m_k r_{k+1}, r_k) (the backward's
// `cores_t`): every product's rows are r_k wide, as vectorisable as the rank allows (an S_k
// form would have rows of m_{K-1} = 4 scalars at the last level). The row is then transposed
// back. The backward, for the row's summed output gradient g (m_0 x W_1), carries the gradient
// of S_k in the S layout, D_k (r_k x W_k), from the first core on:
//     dG_0 += g @ V_1                       D_1 = G_0^T @ g
//     dG_k += D_k @ V_{k+1}                 D_{k+1} = G_k^T @ D_k     (D_k as (r_k m_k x W_{k+1}))
// and for the last core its gradient transposed, (m_{K-1} x r_{K-1}), as the left-to-right
// backward keeps it: D_{K-2}^T @ G_{K-2} (g^T @ G_0 for two cores).

// Multiply-adds of the forward of unique rows [begin, end) in either order: left to right
// shares each distinct prefix's products (counted here), right to left computes every row alone.
// The backward's products follow the same orders with about three times the forward's counts,
// so the forward's counts choose for both.
struct ContractionCost {
  double left_to_right = 0;
  double right_to_left = 0;
};

inline ContractionCost contraction_cost(const TTDims& dims, const SortedRows& sorted,
                                        int64_t begin, int64_t end) {
  const int K = dims.num_cores;
  // Rows of the table under one prefix of each length: divisors of a row into its prefix.
  int64_t under[kMaxCores];
  under[K - 1] = 1;
  for (int k = K - 2; k >= 0; --k) under[k] = under[k + 1] * dims.n[k + 1];
  int64_t distinct[kMaxCores] = {};
  // First row past the current prefix at each level (rows ascend): a division only where a
  // prefix changes.
  int64_t next_prefix_row[kMaxCores];
  for (int k = 0; k < K; ++k) next_prefix_row[k] = -1;
  for (int64_t u = begin; u < end; ++u) {
    const int64_t row = sorted.unique_rows[u];
    // Level 0 is the slice itself and levels past K-2 are per row in both orders: only the
    // middle levels' prefixes matter.
    for (int k = 1; k + 1 < K; ++k) {
      if (row >= next_prefix_row[k]) {
        ++distinct[k];
        next_prefix_row[k] = (row / under[k] + 1) * under[k];
      }
    }
  }
  const double rows = static_cast<double>(end - begin);
  ContractionCost cost;
  for (int k = 1; k + 1 < K; ++k) {
    cost.left_to_right += static_cast<double>(distinct[k]) * dims.prefix_cols[k - 1] * dims.r[k] *
                          dims.m[k] * dims.r[k + 1];
  }
  cost.left_to_right += rows * dims.prefix_cols[K - 2] * dims.r[K - 1] * dims.m[K - 1];
  int64_t suffix_cols = dims.m[K - 1];  // W_{k+1}
  double per_row = 0;
  for (int k = K - 2; k >= 1; --k) {
    per_row += static_cast<double>(dims.r[k]) * dims.m[k] * dims.r[k + 1] * suffix_cols;
    suffix_cols *= dims.m[k];
  }
  per_row += static_cast<double>(dims.m[0]) * dims.r[1] * suffix_cols;
  cost.right_to_left = rows * per_row;
  return cost;
}

// Whether unique rows [begin, end) are contracted right to left.
inline bool goes_right_to_left(const TTDims& dims, const SortedRows& sorted, int64_t begin,
                               int64_t end, Contraction order) {
  if (order != Contraction::kAuto) return order == Contraction::kRightToLeft;
  const ContractionCost cost = contraction_cost(dims, sorted, begin, end);
  return cost.right_to_left < cost.left_to_right;
}

// The suffix products of one row (see above), and its backward.
template <class Isa, typename scalar_t>
struct SuffixWalk {
  const TTDims& dims;
  const scalar_t* const* cores;    // slices (r_k, m_k, r_{k+1})
  const scalar_t* const* cores_t;  // slices transposed, (m_k r_{k+1}, r_k); cores 1 .. K-1
  std::vector<scalar_t> storage;
  scalar_t* v_buf[kMaxCores];  // V_k for 1 <= k <= K-2, (W_k x r_k)
  const scalar_t* v[kMaxCores];  // V_k of the current row, 1 <= k <= K-1
  scalar_t* d_buf[kMaxCores];  // D_k for 1 <= k <= K-2, (r_k x W_k) (backward only)
  int64_t width[kMaxCores];    // W_k
  int64_t digits[kMaxCores];

  SuffixWalk(const TTDims& d, const scalar_t* const* c, const scalar_t* const* ct, bool backward)
      : dims(d), cores(c), cores_t(ct) {
    const int K = dims.num_cores;
    width[K - 1] = dims.m[K - 1];
    for (int k = K - 2; k >= 0; --k) width[k] = width[k + 1] * dims.m[k];
    int64_t total = 0;
    for (int k = 1; k + 1 < K; ++k) total += (backward ? 2 : 1) * width[k] * dims.r[k];
    storage.resize(total);
    scalar_t* next = storage.data();
    for (int k = 1; k + 1 < K; ++k) {
      v_buf[k] = next;
      next += width[k] * dims.r[k];
      d_buf[k] = backward ? next : nullptr;
      if (backward) next += width[k] * dims.r[k];
    }
  }

  // V_{K-1} .. V_1 of `row`.
  TT_INLINE void compute(int64_t row) {
    const int last = dims.num_cores - 1;
    tt_row_digits(row, dims, digits);
    v[last] = cores_t[last] + digits[last] * dims.slice_size(last);
    for (int k = last - 1; k >= 1; --k) {
      const int64_t rows = width[k + 1];
      const int64_t inner = dims.r[k + 1];
      const int64_t cols = dims.r[k];
      const scalar_t* ct = cores_t[k] + digits[k] * dims.slice_size(k);
      for (int64_t c = 0; c < dims.m[k]; ++c) {
        matmul<Isa>(v[k + 1], ct + c * inner * cols, v_buf[k] + c * rows * cols, rows, inner,
                    cols);
      }
      v[k] = v_buf[k];
    }
  }

  // row^T (W_1 x m_0) of the current row into `row_t`, given core 0's slices transposed,
  // (r_1, m_0).
  TT_INLINE void row_transposed(const scalar_t* core0_t, scalar_t* row_t) const {
    const int64_t slice = dims.slice_size(0);
    matmul<Isa>(v[1], core0_t + digits[0] * slice, row_t, width[1], dims.r[1], dims.m[0]);
  }

  // Adds the current row's part of the gradients for its output gradient g (m_0 x W_1): the
  // slices' gradients in `grads` (layout of the cores) but the last core's, which goes
  // transposed, (m_{K-1} x r_{K-1}), into `grad_last_slice_t`.
  TT_INLINE void backward(const scalar_t* g, scalar_t* const* grads,
                          scalar_t* grad_last_slice_t) {
    const int last = dims.num_cores - 1;
    const int64_t slice0 = dims.slice_size(0);
    const scalar_t* g0 = cores[0] + digits[0] * slice0;
    matmul_acc<Isa>(g, v[1], grads[0] + digits[0] * slice0, dims.m[0], width[1], dims.r[1]);
    if (last == 1) {
      matmul_t<Isa>(g, g0, grad_last_slice_t, width[1], dims.m[0], dims.r[1], true);
      return;
    }
    matmul_t<Isa>(g0, g, d_buf[1], dims.r[1], dims.m[0], width[1], false);
    for (int k = 1; k < last; ++k) {
      const int64_t offset = digits[k] * dims.slice_size(k);
      const int64_t rows = dims.r[k] * dims.m[k];
      const int64_t cols = width[k + 1];
      const int64_t rank = dims.r[k + 1];
      matmul_acc<Isa>(d_buf[k], v[k + 1], grads[k] + offset, rows, cols, rank);
      if (k + 1 == last) {
        matmul_t<Isa>(d_buf[k], cores[k] + offset, grad_last_slice_t, cols, rows, rank, true);
      } else {
        matmul_t<Isa>(cores[k] + offset, d_buf[k], d_buf[k + 1], rank, rows, cols, false);
      }
    }
  }
};

// The unique rows [begin, end) in the order the right-to-left backward takes them: grouped by
// their digit of the middle core with the largest slices (a stable counting sort), so that rows
// reading one slice of it and of its transposed copy, and adding to its gradient, follow each
// other and find them in the cache. (Where this order is chosen, sorted rows share few
// prefixes: in their own order every row takes other slices, from all over the core.)
inline void right_to_left_order(const TTDims& dims, const SortedRows& sorted, int64_t begin,
                                int64_t end, std::vector<int64_t>& order) {
  order.resize(end - begin);
  int big = -1;
  for (int k = 1; k + 1 < dims.num_cores; ++k) {
    if (big < 0 || dims.slice_size(k) > dims.slice_size(big)) big = k;
  }
  if (big < 0) {  // two cores: no middle core
    for (int64_t u = begin; u < end; ++u) order[u - begin] = u;
    return;
  }
  int64_t under = 1;  // rows of the table under one digit of core `big`
  for (int k = big + 1; k < dims.num_cores; ++k) under *= dims.n[k];
  std::vector<int64_t> start(dims.n[big] + 1, 0);
  for (int64_t u = begin; u < end; ++u) ++start[sorted.unique_rows[u] / under % dims.n[big] + 1];
  for (int64_t t = 0; t < dims.n[big]; ++t) start[t + 1] += start[t];
  for (int64_t u = begin; u < end; ++u) {
    order[start[sorted.unique_rows[u] / under % dims.n[big]]++] = u;
  }
}

// Prefetches the `bytes` at `p` into the cache, for reading.
inline void prefetch_bytes(const void* p, int64_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
#else
  (void)p, (void)bytes;
#endif
}

// Outputs at least this large are written with streaming (non-temporal) stores: a plain store to
// a scattered row first reads its lines from memory, and an output this large would not stay in
// a core's share of the last-level cache anyway. (The OS's reported L3 size is no guide: it is
// often the whole socket's, shared by every core; glibc's memcpy streams past a similar size.)
constexpr int64_t kStreamOutputBytes = int64_t(16) << 20;

// Whether `out` (rows of `dim` scalars) can be written with 16-byte streaming stores.
template <typename scalar_t>
bool can_stream(const scalar_t* out, int64_t batch, int64_t dim) {
#if defined(TT_HAVE_STREAMING_STORES)
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(scalar_t));
  return batch * row_bytes >= kStreamOutputBytes && row_bytes % 16 == 0 &&
         reinterpret_cast<uintptr_t>(out) % 16 == 0;
#else
  (void)out, (void)batch, (void)dim;
  return false;
#endif
}

// Copies `bytes` (a multiple of 16) from `src` to the 16-byte aligned `dst`, bypassing the cache.
inline void stream_copy(void* dst, const void* src, int64_t bytes) {
#if defined(TT_HAVE_STREAMING_STORES)
  auto* d = static_cast<__m128i*>(dst);
  const auto* s = static_cast<const __m128i*>(src);
  for (int64_t j = 0; j < bytes / 16; ++j) _mm_stream_si128(d + j, _mm_loadu_si128(s + j));
#else
  std::memcpy(dst, src, bytes);
#endif
}

// Orders this thread's streaming stores before whatever it does next (a barrier, a return).
inline void stream_fence() {
#if defined(TT_HAVE_STREAMING_STORES)
  _mm_sfence();
#endif
}

// Copies unique row u, computed at `row` (at its first position when not streaming), to the
// positions that asked for it.
template <typename scalar_t>
TT_INLINE void copy_to_positions(const scalar_t* row, const SortedRows& sorted, int64_t u,
                                 scalar_t* out, int64_t dim, bool stream) {
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(scalar_t));
  const int64_t first = sorted.offsets[u];
  const int64_t stop = sorted.offsets[u + 1];
  if (stream) {
    for (int64_t s = first; s < stop; ++s) stream_copy(out + sorted.positions[s] * dim, row, row_bytes);
  } else {
    for (int64_t s = first + 1; s < stop; ++s) {
      std::memcpy(out + sorted.positions[s] * dim, row, row_bytes);
    }
  }
}

// The forward of unique rows [begin, end), right to left: `cores_t` holds the slices of cores
// 1 .. K-1 transposed, (m_k r_{k+1}, r_k), and `core0_t` those of core 0, (r_1, m_0).
template <class Isa, typename scalar_t>
TT_INLINE void forward_range_right_to_left(const TTDims& dims, const scalar_t* const* cores,
                                           const scalar_t* const* cores_t,
                                           const scalar_t* core0_t, const SortedRows& sorted,
                                           scalar_t* out, bool stream, int64_t begin,
                                           int64_t end) {
  SuffixWalk<Isa, scalar_t> walk(dims, cores, cores_t, false);
  std::vector<scalar_t> row_t(dims.dim);
  std::vector<scalar_t> row_buf(stream ? dims.dim : 0);
  for (int64_t u = begin; u < end; ++u) {
    walk.compute(sorted.unique_rows[u]);
    walk.row_transposed(core0_t, row_t.data());
    scalar_t* dst = stream ? row_buf.data() : out + sorted.positions[sorted.offsets[u]] * dims.dim;
    cpu::transpose(row_t.data(), dst, walk.width[1], dims.m[0]);
    copy_to_positions(dst, sorted, u, out, dims.dim, stream);
  }
  if (stream) stream_fence();
}

template <class Isa, typename scalar_t>
TT_INLINE void forward_range(const TTDims& dims, const scalar_t* const* cores,
                             const scalar_t* tiles, const SortedRows& sorted, scalar_t* out,
                             bool stream, int64_t begin, int64_t end) {
  const LastStep step(dims);
  PrefixWalk<Isa, scalar_t> walk(dims, cores);
  std::vector<scalar_t> spread(step.tiled ? step.spread_size() : 0);
  // When streaming, each row is computed here (in cache) and then streamed to its positions.
  std::vector<scalar_t> row_buf(stream ? step.dim : 0);
  for (int64_t u = begin; u < end; ++u) {
    const int level = walk.advance(sorted.unique_rows[u]);
    walk.recompute(level);
    scalar_t* dst = stream ? row_buf.data() : out + sorted.positions[sorted.offsets[u]] * step.dim;
    const int64_t digit = walk.digits[step.last];
    if (step.tiled) {
      if (level < step.last) {
        cpu::spread_rows(walk.partial[step.last - 1], spread.data(), step.rows, step.inner,
                         step.cols);
      }
      cpu::tiled_product<Isa>(spread.data(), tiles + digit * step.tile_size(), dst, step.inner,
                              step.dim, step.period);
    } else {
      matmul<Isa>(walk.partial[step.last - 1], walk.slice(step.last, digit), dst, step.rows,
                  step.inner, step.cols);
    }
    copy_to_positions(dst, sorted, u, out, step.dim, stream);
  }
  if (stream) stream_fence();
}

template <class Isa, typename scalar_t>
struct BackwardWalk : PrefixWalk<Isa, scalar_t> {
  using PrefixWalk<Isa, scalar_t>::dims;
  using PrefixWalk<Isa, scalar_t>::partial;
  using PrefixWalk<Isa, scalar_t>::prev_digits;
  const scalar_t* const* cores_t;  // slices transposed: (m_k r_{k+1}, r_k)
  scalar_t* const* grads;          // this thread's dense core gradients
  std::vector<scalar_t> grad_storage;
  scalar_t* grad_partial[kMaxCores];  // gradient of P_k, 0 <= k <= K-2

  BackwardWalk(const TTDims& d, const scalar_t* const* c, const scalar_t* const* ct,
               scalar_t* const* g)
      : PrefixWalk<Isa, scalar_t>(d, c), cores_t(ct), grads(g) {
    int64_t total = 0;
    for (int k = 0; k + 1 < dims.num_cores; ++k) total += dims.partial_size(k);
    grad_storage.assign(total, scalar_t(0));
    int64_t offset = 0;
    for (int k = 0; k + 1 < dims.num_cores; ++k) {
      grad_partial[k] = grad_storage.data() + offset;
      offset += dims.partial_size(k);
    }
  }

  // The previous row's prefix at `level` is complete: push its gradient into the slice
  // G_level[t_level] and into the prefix one level up, then clear it.
  TT_INLINE void flush(int level) {
    const int64_t digit = prev_digits[level];
    const int64_t size = dims.partial_size(level);
    scalar_t* g = grad_partial[level];
    if (level == 0) {
      scalar_t* dst = grads[0] + digit * dims.slice_size(0);
      cpu::add_row<Isa>(dst, g, size);
    } else {
      const int64_t rows = dims.prefix_cols[level - 1];
      const int64_t inner = dims.r[level];
      const int64_t cols = dims.m[level] * dims.r[level + 1];
      const int64_t offset = digit * dims.slice_size(level);
      matmul_tn_acc<Isa>(partial[level - 1], g, grads[level] + offset, rows, inner, cols);
      matmul_nt_acc<Isa>(g, cores_t[level] + offset, grad_partial[level - 1], rows, inner, cols);
    }
    std::fill(g, g + size, scalar_t(0));
  }
};

// dst = the sum of the output gradients of every position holding unique row u (`dim` scalars).
template <class Isa, typename scalar_t>
TT_INLINE void sum_grad_row(const scalar_t* grad_out, const SortedRows& sorted, int64_t u, int64_t dim,
                            scalar_t* TT_RESTRICT dst) {
  const int64_t first = sorted.offsets[u];
  const int64_t stop = sorted.offsets[u + 1];
  std::memcpy(dst, grad_out + sorted.positions[first] * dim, dim * static_cast<int64_t>(sizeof(scalar_t)));
  for (int64_t s = first + 1; s < stop; ++s) {
    cpu::add_row<Isa>(dst, grad_out + sorted.positions[s] * dim, dim);
  }
}

// dst[i] = the sum of the output gradients of every position holding unique row begin + i, for
// the unique rows [begin, end): rows of `dim` scalars. The output gradients are scattered over
// the batch: gathering them in a loop of loads alone keeps many of them in flight, and positions
// a little ahead (Isa::kPrefetchAhead) are prefetched; the computation then reads them from the
// cache.
template <class Isa, typename scalar_t>
TT_INLINE void gather_grad_rows(const scalar_t* grad_out, const SortedRows& sorted, int64_t begin,
                                int64_t end, int64_t dim, scalar_t* TT_RESTRICT dst) {
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(scalar_t));
  const int64_t last_position = sorted.offsets[end];
  int64_t prefetched = sorted.offsets[begin];
  for (int64_t u = begin; u < end; ++u, dst += dim) {
    const int64_t horizon = std::min(sorted.offsets[u + 1] + Isa::kPrefetchAhead, last_position);
    for (; prefetched < horizon; ++prefetched) {
      prefetch_bytes(grad_out + sorted.positions[prefetched] * dim, row_bytes);
    }
    sum_grad_row<Isa>(grad_out, sorted, u, dim, dst);
  }
}

// gather_grad_rows for the unique rows listed in `rows` (`count` of them), with the positions of
// the rows a few ahead in the list prefetched.
template <class Isa, typename scalar_t>
TT_INLINE void gather_grad_rows_listed(const scalar_t* grad_out, const SortedRows& sorted,
                                       const int64_t* rows, int64_t count, int64_t dim,
                                       scalar_t* TT_RESTRICT dst) {
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(scalar_t));
  const auto prefetch_row = [&](int64_t u) {  // the output gradients of every position of row u
    for (int64_t s = sorted.offsets[u]; s < sorted.offsets[u + 1]; ++s) {
      prefetch_bytes(grad_out + sorted.positions[s] * dim, row_bytes);
    }
  };
  const int64_t ahead = std::min<int64_t>(Isa::kPrefetchAhead, count);
  for (int64_t i = 0; i < ahead; ++i) prefetch_row(rows[i]);
  for (int64_t i = 0; i < count; ++i, dst += dim) {
    if (i + ahead < count) prefetch_row(rows[i + ahead]);
    sum_grad_row<Isa>(grad_out, sorted, rows[i], dim, dst);
  }
}

// `grad_last_t`: this thread's gradient of the last core, each slice transposed to
// (m_{K-1}, r_{K-1}) (see cpu::matmul_tn_acc_transposed), zeroed lazily: `touched[t]` says whether
// slice t holds data.
template <class Isa, typename scalar_t>
TT_INLINE void backward_range(const TTDims& dims, const scalar_t* const* cores,
                              const scalar_t* const* cores_t, const SortedRows& sorted,
                              const scalar_t* grad_out, scalar_t* const* grads,
                              scalar_t* grad_last_t, char* touched, int64_t begin, int64_t end) {
  constexpr int64_t kGatherRows = Isa::kGatherRows;
  const LastStep step(dims);
  BackwardWalk<Isa, scalar_t> walk(dims, cores, cores_t, grads);
  const int64_t slice = dims.slice_size(step.last);
  std::vector<scalar_t> gathered(kGatherRows * step.dim);
  for (int64_t u = begin; u < end; ++u) {
    if ((u - begin) % kGatherRows == 0) {
      gather_grad_rows<Isa>(grad_out, sorted, u, std::min(u + kGatherRows, end), step.dim,
                            gathered.data());
    }
    const int level = walk.advance(sorted.unique_rows[u]);
    if (u > begin && level < step.last) {
      for (int k = step.last - 1; k >= level; --k) walk.flush(k);
    }
    walk.recompute(level);
    const scalar_t* g = gathered.data() + ((u - begin) % kGatherRows) * step.dim;
    const int64_t digit = walk.digits[step.last];
    scalar_t* grad_slice_t = grad_last_t + digit * slice;
    if (!touched[digit]) {
      std::fill(grad_slice_t, grad_slice_t + slice, scalar_t(0));
      touched[digit] = 1;
    }
    const scalar_t* prefix = walk.partial[step.last - 1];
    matmul_tn_acc_transposed<Isa>(prefix, g, grad_slice_t, step.rows, step.inner, step.cols);
    matmul_nt_acc<Isa>(g, cores_t[step.last] + digit * slice, walk.grad_partial[step.last - 1],
                       step.rows, step.inner, step.cols);
  }
  if (end > begin) {
    // The last row's prefixes are complete at every level.
    for (int k = 0; k < dims.num_cores; ++k) walk.prev_digits[k] = walk.digits[k];
    for (int k = step.last - 1; k >= 0; --k) walk.flush(k);
  }
}

// The backward of unique rows [begin, end), right to left (`cores_t` as in the forward; see
// backward_range for `grad_last_t` and `touched`).
template <class Isa, typename scalar_t>
TT_INLINE void backward_range_right_to_left(const TTDims& dims, const scalar_t* const* cores,
                                            const scalar_t* const* cores_t,
                                            const SortedRows& sorted, const scalar_t* grad_out,
                                            scalar_t* const* grads, scalar_t* grad_last_t,
                                            char* touched, int64_t begin, int64_t end) {
  constexpr int64_t kGatherRows = Isa::kGatherRows;
  const int last = dims.num_cores - 1;
  const int64_t slice = dims.slice_size(last);
  SuffixWalk<Isa, scalar_t> walk(dims, cores, cores_t, true);
  std::vector<scalar_t> gathered(kGatherRows * dims.dim);
  std::vector<int64_t> order;
  right_to_left_order(dims, sorted, begin, end, order);
  const int64_t count = end - begin;
  for (int64_t i = 0; i < count; ++i) {
    if (i % kGatherRows == 0) {
      gather_grad_rows_listed<Isa>(grad_out, sorted, order.data() + i,
                                   std::min(kGatherRows, count - i), dims.dim, gathered.data());
    }
    const int64_t u = order[i];
    walk.compute(sorted.unique_rows[u]);
    const int64_t digit = walk.digits[last];
    scalar_t* grad_slice_t = grad_last_t + digit * slice;
    if (!touched[digit]) {
      std::fill(grad_slice_t, grad_slice_t + slice, scalar_t(0));
      touched[digit] = 1;
    }
    walk.backward(gathered.data() + (i % kGatherRows) * dims.dim, grads, grad_slice_t);
  }
}

// ------------------------------------------------------------------ per-path entry points
//
// One set per path, each function compiled with the path's target flags (everything it calls
// above is forced inline, so it is vectorised for that path).

// What a forward range needs of the cores: the cores; the last core's tiles (left to right);
// cores 1 .. K-1 transposed and core 0 transposed (right to left).
template <typename scalar_t>
struct ForwardCores {
  const scalar_t* const* cores;
  const scalar_t* tiles;
  const scalar_t* const* cores_t;
  const scalar_t* core0_t;
};

template <typename scalar_t>
using ForwardRangeFn = void (*)(const TTDims&, const ForwardCores<scalar_t>&, const SortedRows&,
                                scalar_t*, bool, int64_t, int64_t, bool);
template <typename scalar_t>
using BackwardRangeFn = void (*)(const TTDims&, const scalar_t* const*, const scalar_t* const*,
                                 const SortedRows&, const scalar_t*, scalar_t* const*, scalar_t*,
                                 char*, int64_t, int64_t, bool);

template <class Isa>
struct PathEntries;

#define TT_DEFINE_PATH_ENTRIES(ISA, TARGET)                                                     \
  template <>                                                                                   \
  struct PathEntries<ISA> {                                                                     \
    template <typename scalar_t>                                                                \
    TARGET static void forward(const TTDims& dims, const ForwardCores<scalar_t>& c,            \
                               const SortedRows& sorted, scalar_t* out, bool stream,           \
                               int64_t begin, int64_t end, bool right_to_left) {                \
      if (right_to_left) {                                                                      \
        forward_range_right_to_left<ISA>(dims, c.cores, c.cores_t, c.core0_t, sorted, out,      \
                                         stream, begin, end);                                   \
      } else {                                                                                  \
        forward_range<ISA>(dims, c.cores, c.tiles, sorted, out, stream, begin, end);            \
      }                                                                                         \
    }                                                                                           \
    template <typename scalar_t>                                                                \
    TARGET static void backward(const TTDims& dims, const scalar_t* const* cores,              \
                                const scalar_t* const* cores_t, const SortedRows& sorted,       \
                                const scalar_t* grad_out, scalar_t* const* grads,               \
                                scalar_t* grad_last_t, char* touched, int64_t begin,            \
                                int64_t end, bool right_to_left) {                              \
      if (right_to_left) {                                                                      \
        backward_range_right_to_left<ISA>(dims, cores, cores_t, sorted, grad_out, grads,        \
                                          grad_last_t, touched, begin, end);                    \
      } else {                                                                                  \
        backward_range<ISA>(dims, cores, cores_t, sorted, grad_out, grads, grad_last_t,         \
                            touched, begin, end);                                               \
      }                                                                                         \
    }                                                                                           \
  };

#if TT_CPU_MULTI_ISA
TT_DEFINE_PATH_ENTRIES(IsaAvx512, TT_TARGET_AVX512)
TT_DEFINE_PATH_ENTRIES(IsaAvx2, TT_TARGET_AVX2)
#endif
TT_DEFINE_PATH_ENTRIES(IsaBaseline, )

// The range functions of the active path.
template <typename scalar_t>
struct RangeFns {
  ForwardRangeFn<scalar_t> forward;
  BackwardRangeFn<scalar_t> backward;
};

template <class Isa, typename scalar_t>
RangeFns<scalar_t> range_fns_of() {
  return {&PathEntries<Isa>::template forward<scalar_t>,
          &PathEntries<Isa>::template backward<scalar_t>};
}

template <typename scalar_t>
RangeFns<scalar_t> active_range_fns() {
  switch (cpu_isa_active()) {
#if TT_CPU_MULTI_ISA
    case CpuIsa::kAvx512: return range_fns_of<IsaAvx512, scalar_t>();
    case CpuIsa::kAvx2: return range_fns_of<IsaAvx2, scalar_t>();
#endif
    default: return range_fns_of<IsaBaseline, scalar_t>();
  }
}

// Each slice of a core, (rows x cols), transposed into `dst` at the same offset: a worksharing
// loop of the enclosing parallel region, without a barrier, or a serial loop outside of one.
template <typename scalar_t>
void transpose_slices(const scalar_t* src, scalar_t* dst, int64_t slices, int64_t rows,
                      int64_t cols) {
#pragma omp for schedule(static) nowait
  for (int64_t t = 0; t < slices; ++t) {
    cpu::transpose(src + t * rows * cols, dst + t * rows * cols, rows, cols);
  }
}

// Offsets of each core's parameters in one buffer of all of them; returns the total.
inline int64_t core_offsets(const TTDims& dims, int64_t* offsets) {
  int64_t total = 0;
  for (int k = 0; k < dims.num_cores; ++k) {
    offsets[k] = total;
    total += dims.n[k] * dims.slice_size(k);
  }
  return total;
}

// Which order each window of kRowsPerChunk sorted unique rows is contracted in. Windows, not the
// threads' chunks: the two orders round differently, and a row's value must not depend on the
// thread count. (Chosen before the parallel region: a division per distinct prefix, and no
// barrier for threads a loaded machine may have descheduled.)
inline std::vector<char> choose_orders(const TTDims& dims, const SortedRows& sorted,
                                       Contraction order) {
  const int64_t num_unique = static_cast<int64_t>(sorted.unique_rows.size());
  std::vector<char> right_to_left((num_unique + kRowsPerChunk - 1) / kRowsPerChunk);
  for (int64_t w = 0; w < static_cast<int64_t>(right_to_left.size()); ++w) {
    right_to_left[w] = goes_right_to_left(dims, sorted, w * kRowsPerChunk,
                                          std::min(num_unique, (w + 1) * kRowsPerChunk), order);
  }
  return right_to_left;
}

// Calls run(begin, end, right_to_left) for the pieces of unique rows [begin, end) that take one
// order (windows of kRowsPerChunk rows, see choose_orders; neighbours of one order merged).
template <typename Run>
inline void for_each_order(int64_t begin, int64_t end, const std::vector<char>& right_to_left,
                           Run run) {
  while (begin < end) {
    const bool rtl = right_to_left[begin / kRowsPerChunk];
    int64_t stop = begin;
    while (stop < end && static_cast<bool>(right_to_left[stop / kRowsPerChunk]) == rtl) {
      stop = std::min(end, (stop / kRowsPerChunk + 1) * kRowsPerChunk);
    }
    run(begin, stop, rtl);
    begin = stop;
  }
}

template <typename scalar_t>
void forward_impl(const TTDims& dims, const std::vector<at::Tensor>& cores,
                  const SortedRows& sorted, at::Tensor& out) {
  const int num_cores = dims.num_cores;
  std::vector<const scalar_t*> core_ptrs;
  for (const auto& core : cores) core_ptrs.push_back(core.const_data_ptr<scalar_t>());
  scalar_t* out_ptr = out.mutable_data_ptr<scalar_t>();
  const int64_t num_unique = static_cast<int64_t>(sorted.unique_rows.size());
  const int threads = threads_for(num_unique);
  const int64_t chunks = chunks_for(num_unique, threads);
  const LastStep step(dims);
  const bool stream =
      can_stream(out_ptr, static_cast<int64_t>(sorted.positions.size()), dims.dim);
  const ForwardRangeFn<scalar_t> forward_range_fn = active_range_fns<scalar_t>().forward;
  const std::vector<char> right_to_left = choose_orders(dims, sorted, contraction_active());
  bool any_left_to_right = false, any_right_to_left = false;
  // The operands each order needs, prepared once per call (for the orders some chunk uses).
  auto& tiles = workspace<scalar_t, 10>();
  auto& cores_t = workspace<scalar_t, 11>();
  auto& core0_t = workspace<scalar_t, 15>();
  int64_t offsets[kMaxCores];
  const int64_t total_params = core_offsets(dims, offsets);
  std::vector<const scalar_t*> core_t_ptrs(num_cores, nullptr);
  ForwardCores<scalar_t> operands{core_ptrs.data(), nullptr, core_t_ptrs.data(), nullptr};
  for (const char rtl : right_to_left) (rtl ? any_right_to_left : any_left_to_right) = true;
  if (any_left_to_right && step.tiled) {
    tiles.resize(dims.n[step.last] * step.tile_size());
    operands.tiles = tiles.data();
  }
  if (any_right_to_left) {
    cores_t.resize(total_params);
    core0_t.resize(dims.n[0] * dims.slice_size(0));
    for (int k = 1; k < num_cores; ++k) core_t_ptrs[k] = cores_t.data() + offsets[k];
    operands.core0_t = core0_t.data();
  }
#pragma omp parallel num_threads(threads)
  {
    // The operands, shared out among the threads with one barrier in all.
    if (any_left_to_right && step.tiled) {
      const int64_t slice = dims.slice_size(step.last);
#pragma omp for nowait
      for (int64_t t = 0; t < dims.n[step.last]; ++t) {
        cpu::tile_cols(core_ptrs[step.last] + t * slice, tiles.data() + t * step.tile_size(),
                       step.inner, step.cols, step.period);
      }
    }
    if (any_right_to_left) {
      transpose_slices(core_ptrs[0], core0_t.data(), dims.n[0], dims.m[0], dims.r[1]);
      for (int k = 1; k < num_cores; ++k) {
        transpose_slices(core_ptrs[k], cores_t.data() + offsets[k], dims.n[k], dims.r[k],
                         dims.m[k] * dims.r[k + 1]);
      }
    }
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      int64_t begin, end;
      split_range(num_unique, chunk, chunks, &begin, &end);
      for_each_order(begin, end, right_to_left, [&](int64_t b, int64_t e, bool rtl) {
        forward_range_fn(dims, operands, sorted, out_ptr, stream, b, e, rtl);
      });
    }
  }
}

template <typename scalar_t>
void backward_impl(const TTDims& dims, const std::vector<at::Tensor>& cores,
                   const SortedRows& sorted, const at::Tensor& grad_out,
                   std::vector<at::Tensor>& grads) {
  const int num_cores = dims.num_cores;
  std::vector<const scalar_t*> core_ptrs;
  for (int k = 0; k < num_cores; ++k) core_ptrs.push_back(cores[k].const_data_ptr<scalar_t>());
  // Each slice transposed, (r_k, m_k r_{k+1}) -> (m_k r_{k+1}, r_k), so that the gradient of
  // the prefix is an axpy over the rank (contiguous) instead of a strided dot product (left to
  // right), and the suffix products' rows are r_k wide (right to left).
  int64_t offsets[kMaxCores];
  const int64_t total_params = core_offsets(dims, offsets);
  auto& cores_t = workspace<scalar_t, 11>();
  cores_t.resize(total_params);
  std::vector<const scalar_t*> core_t_ptrs;
  for (int k = 0; k < num_cores; ++k) core_t_ptrs.push_back(cores_t.data() + offsets[k]);
  const int64_t num_unique = static_cast<int64_t>(sorted.unique_rows.size());
  const int threads = threads_for(num_unique);
  const int64_t chunks = chunks_for(num_unique, threads);
  const std::vector<char> right_to_left = choose_orders(dims, sorted, contraction_active());
  const LastStep step(dims);
  const int64_t last_slices = dims.n[step.last];
  const int64_t last_slice = dims.slice_size(step.last);
  // Per thread (thread-local workspaces): the transposed gradient of the last core, which of its
  // slices it has touched, and (threads other than 0, which accumulates into the returned
  // gradients) private gradients.
  std::vector<scalar_t*> grad_last_t(threads, nullptr);
  std::vector<char*> touched(threads, nullptr);
  std::vector<std::vector<scalar_t*>> grad_ptrs(threads);
  for (int k = 0; k < num_cores; ++k) grad_ptrs[0].push_back(grads[k].mutable_data_ptr<scalar_t>());
  const scalar_t* grad_out_ptr = grad_out.const_data_ptr<scalar_t>();
  const BackwardRangeFn<scalar_t> backward_range_fn = active_range_fns<scalar_t>().backward;

  for (int k = 0; k < num_cores; ++k) {
    transpose_slices(core_ptrs[k], cores_t.data() + offsets[k], dims.n[k], dims.r[k],
                     dims.m[k] * dims.r[k + 1]);
  }

#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num();
    const int team = omp_get_num_threads();
    auto& my_grad_last_t = workspace<scalar_t, 12>();
    auto& my_touched = workspace<char, 13>();
    my_grad_last_t.resize(last_slices * last_slice);
    my_touched.assign(last_slices, 0);
    grad_last_t[tid] = my_grad_last_t.data();
    touched[tid] = my_touched.data();
    if (tid > 0) {
      auto& private_grads = workspace<scalar_t, 14>();
      private_grads.assign(total_params, scalar_t(0));
      for (int k = 0; k < num_cores; ++k) grad_ptrs[tid].push_back(private_grads.data() + offsets[k]);
    }
    // Chunks dealt out round-robin, not dynamically: which chunks a thread sums into its buffer
    // (and so the rounding of the gradients) depends only on the thread count.
#pragma omp for schedule(static, 1)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      int64_t begin, end;
      split_range(num_unique, chunk, chunks, &begin, &end);
      for_each_order(begin, end, right_to_left, [&](int64_t b, int64_t e, bool rtl) {
        backward_range_fn(dims, core_ptrs.data(), core_t_ptrs.data(), sorted, grad_out_ptr,
                          grad_ptrs[tid].data(), grad_last_t[tid], touched[tid], b, e, rtl);
      });
    }
    // Transpose the touched slices' gradients back into the core's layout, (r_{K-1}, m_{K-1}).
    for (int64_t t = 0; t < last_slices; ++t) {
      if (!touched[tid][t]) continue;
      const scalar_t* TT_RESTRICT src = grad_last_t[tid] + t * last_slice;
      scalar_t* TT_RESTRICT dst = grad_ptrs[tid][step.last] + t * last_slice;
      for (int64_t q = 0; q < step.inner; ++q) {
        for (int64_t c = 0; c < step.cols; ++c) dst[q * step.cols + c] += src[c * step.inner + q];
      }
    }
#pragma omp barrier
    // Sum the private buffers into the returned gradients, each thread a share of every core.
    for (int k = 0; k < num_cores && team > 1; ++k) {
      const int64_t size = dims.n[k] * dims.slice_size(k);
      int64_t lo, hi;
      split_range(size, tid, team, &lo, &hi);
      scalar_t* TT_RESTRICT dst = grad_ptrs[0][k];
      for (int t = 1; t < team; ++t) {
        const scalar_t* TT_RESTRICT src = grad_ptrs[t][k];
        for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
      }
    }
  }
}

at::Tensor tt_lookup_cpu(const std::vector<at::Tensor>& cores_in, const at::Tensor& rows_in) {
  const char* op = "ttgnn::tt_lookup";
  const TTDims dims = check_lookup_inputs(cores_in, rows_in, op);
  const auto cores = contiguous_cores(cores_in);
  const auto rows = rows_in.contiguous();
  const int64_t batch = rows.numel();
  at::Tensor out = at::empty({batch, dims.dim}, cores[0].options());
  if (batch == 0) return out;
  const SortedRows& sorted = sort_rows(rows, dims.num_rows, op);
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "tt_lookup_cpu",
                             [&] { forward_impl<scalar_t>(dims, cores, sorted, out); });
  return out;
}

std::vector<at::Tensor> tt_lookup_backward_cpu(const at::Tensor& grad_out_in,
                                               const std::vector<at::Tensor>& cores_in,
                                               const at::Tensor& rows_in) {
  const char* op = "ttgnn::tt_lookup_backward";
  const TTDims dims = check_lookup_inputs(cores_in, rows_in, op);
  check_grad_output(grad_out_in, rows_in, dims, cores_in[0], op);
  const auto cores = contiguous_cores(cores_in);
  const auto rows = rows_in.contiguous();
  const auto grad_out = grad_out_in.contiguous();
  std::vector<at::Tensor> grads;
  for (const auto& core : cores) grads.push_back(at::zeros(core.sizes(), core.options()));
  if (rows.numel() == 0) return grads;
  const SortedRows& sorted = sort_rows(rows, dims.num_rows, op);
  AT_DISPATCH_FLOATING_TYPES(grad_out.scalar_type(), "tt_lookup_backward_cpu", [&] {
    backward_impl<scalar_t>(dims, cores, sorted, grad_out, grads);
  });
  return grads;
}

}  // namespace
}  // namespace ttgnn

TORCH_LIBRARY_IMPL(ttgnn, CPU, m) {
  m.impl("tt_lookup", &ttgnn::tt_lookup_cpu);
  m.impl("tt_lookup_backward", &ttgnn::tt_lookup_backward_cpu);
}
