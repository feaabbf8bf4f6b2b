// The CPU form of the lookup's products (see ../tt_lookup_math.h for the maths): whole
// row-major products, written with explicit vectors whose width and block sizes come from the
// instruction-set path `Isa` (tt_lookup_cpu_tuning.h).
//
// Every function here is forced inline, so that it is compiled inside the per-path entry
// functions of tt_lookup_cpu.cpp with that path's target flags. Blocks that must stay in
// registers are arrays of vectors indexed by compile-time constants only (fully unrolled
// loops): compilers keep such arrays in registers, while an array of scalars that a loop
// vectorises may live on the stack (GCC 12 did that for 16-float rows in the AVX2 path, and its
// 16-byte stores then 32-byte loads of the same bytes defeated store-to-load forwarding: the
// backward ran several times slower there than in the AVX-512 path).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../tt_lookup_math.h"

// Vectors wider than the baseline's appear in the signatures of these inline helpers; they are
// only ever inlined into functions compiled for a path that has such vectors.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace ttgnn {
namespace cpu {

// A vector of kBytes / sizeof(T) lanes (GCC/Clang vector extension).
template <typename T, int64_t kBytes>
struct VecType {
  typedef T type __attribute__((vector_size(kBytes)));
};
template <typename T, int64_t kBytes>
using Vec = typename VecType<T, kBytes>::type;

template <typename V, typename T>
TT_INLINE V vload(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}

template <typename V, typename T>
TT_INLINE void vstore(T* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof(V));
}

// Bytes of the vectors that hold rows of kWidth scalars: the path's vector, or the whole row
// when it is narrower.
template <class Isa, typename T, int64_t kWidth>
constexpr int64_t row_vector_bytes() {
  return std::min<int64_t>(Isa::kVectorBytes, kWidth * static_cast<int64_t>(sizeof(T)));
}

// y[0:n] += x[0:n].
template <class Isa, typename T>
TT_INLINE void add_row(T* TT_RESTRICT y, const T* TT_RESTRICT x, int64_t n) {
  using V = Vec<T, Isa::kVectorBytes>;
  constexpr int64_t kLanes = Isa::kVectorBytes / sizeof(T);
  int64_t j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
    const V a = vload<V>(y + j) + vload<V>(x + j);
    const V b = vload<V>(y + j + kLanes) + vload<V>(x + j + kLanes);
    vstore(y + j, a);
    vstore(y + j + kLanes, b);
  }
  for (; j < n; ++j) y[j] += x[j];
}

// ------------------------------------------------------------------ row combinations
//
// out[a][0:width] (=, or += when `accumulate`) sum_k X(a, k) M[k][0:width], with
// X(a, k) = X[a * xr + k * xk] (xr = terms, xk = 1: X is (rows x terms), row-major; xr = 1,
// xk = rows: X is given transposed), M (terms x width), out (rows x width). For the common widths
// a block of kRows rows x kPanel columns of `out` stays in registers across the whole sum over k
// (several rows side by side: each accumulator's chain of FMAs is one term long per step, and
// the rows' chains overlap), the block taking at most Isa::kBlockBytes.

template <class Isa, int64_t kWidth, int64_t kPanel, int64_t kRows, typename T>
TT_INLINE void row_combinations_block(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                      T* TT_RESTRICT out, int64_t terms, int64_t xr,
                                      int64_t xk, bool accumulate) {
  constexpr int64_t kBytes = row_vector_bytes<Isa, T, kPanel>();
  constexpr int64_t kLanes = kBytes / sizeof(T);
  constexpr int64_t kVecs = kPanel / kLanes;
  using V = Vec<T, kBytes>;
  V acc[kRows][kVecs];
  TT_UNROLL
  for (int64_t r = 0; r < kRows; ++r) {
    TT_UNROLL
    for (int64_t v = 0; v < kVecs; ++v) {
      acc[r][v] = accumulate ? vload<V>(out + r * kWidth + v * kLanes) : V{};
    }
  }
  for (int64_t k = 0; k < terms; ++k) {
    V m[kVecs];
    TT_UNROLL
    for (int64_t v = 0; v < kVecs; ++v) m[v] = vload<V>(M + k * kWidth + v * kLanes);
    TT_UNROLL
    for (int64_t r = 0; r < kRows; ++r) {
      // A vector times a scalar: compilers broadcast the scalar with one instruction. (A
      // broadcast built in a helper of its own became a chain of lane inserts in GCC 12: the
      // helper is compiled for the baseline before it is inlined into a path's entry.)
      const T alpha = X[r * xr + k * xk];
      TT_UNROLL
      for (int64_t v = 0; v < kVecs; ++v) acc[r][v] += m[v] * alpha;
    }
  }
  TT_UNROLL
  for (int64_t r = 0; r < kRows; ++r) {
    TT_UNROLL
    for (int64_t v = 0; v < kVecs; ++v) vstore(out + r * kWidth + v * kLanes, acc[r][v]);
  }
}

// All `rows` rows in blocks of kRows, the rest in one block each of kRows / 2, kRows / 4, ...
template <class Isa, int64_t kWidth, int64_t kPanel, int64_t kRows, typename T>
TT_INLINE void row_combinations_panel(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                      T* TT_RESTRICT out, int64_t rows, int64_t terms,
                                      int64_t xr, int64_t xk, bool accumulate) {
  int64_t a = 0;
  for (; a + kRows <= rows; a += kRows) {
    row_combinations_block<Isa, kWidth, kPanel, kRows>(X + a * xr, M, out + a * kWidth, terms, xr,
                                                       xk, accumulate);
  }
  if constexpr (kRows > 1) {
    if (a < rows) {
      row_combinations_panel<Isa, kWidth, kPanel, kRows / 2>(X + a * xr, M, out + a * kWidth,
                                                             rows - a, terms, xr, xk, accumulate);
    }
  }
}

template <class Isa, int64_t kWidth, typename T>
TT_INLINE void row_combinations_fixed(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                      T* TT_RESTRICT out, int64_t rows, int64_t terms,
                                      int64_t xr, int64_t xk, bool accumulate) {
  constexpr int64_t kBlockScalars = Isa::kBlockBytes / static_cast<int64_t>(sizeof(T));
  // Columns per panel: the whole row when a row fits the block, else the block's width.
  constexpr int64_t kPanel = std::min<int64_t>(kWidth, kBlockScalars);
  constexpr int64_t kRows = std::max<int64_t>(1, kBlockScalars / kPanel);
  for (int64_t p = 0; p < kWidth; p += kPanel) {
    row_combinations_panel<Isa, kWidth, kPanel, kRows>(X, M + p, out + p, rows, terms, xr, xk,
                                                       accumulate);
  }
}

template <class Isa, typename T>
TT_INLINE void row_combinations(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                T* TT_RESTRICT out, int64_t rows, int64_t terms, int64_t width,
                                int64_t xr, int64_t xk, bool accumulate) {
  switch (width) {
    case 4: row_combinations_fixed<Isa, 4>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 8: row_combinations_fixed<Isa, 8>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 16: row_combinations_fixed<Isa, 16>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 32: row_combinations_fixed<Isa, 32>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 64: row_combinations_fixed<Isa, 64>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 128: row_combinations_fixed<Isa, 128>(X, M, out, rows, terms, xr, xk, accumulate); return;
    default: break;
  }
  for (int64_t a = 0; a < rows; ++a) {
    T* TT_RESTRICT o = out + a * width;
    if (!accumulate) {
      for (int64_t j = 0; j < width; ++j) o[j] = T(0);
    }
    for (int64_t k = 0; k < terms; ++k) {
      const T alpha = X[a * xr + k * xk];
      const T* TT_RESTRICT m = M + k * width;
      TT_SIMD
      for (int64_t j = 0; j < width; ++j) o[j] += alpha * m[j];
    }
  }
}

// row_combinations<Isa> as one function per path and scalar type, compiled with the path's
// target flags: tt_lookup_cpu.cpp defines it for every path, so that the products below (called
// from several places of each kernel) share one copy of its many fixed-width forms.
template <class Isa, typename T>
void path_row_combinations(const T* X, const T* M, T* out, int64_t rows, int64_t terms,
                           int64_t width, int64_t xr, int64_t xk, bool accumulate);

// C = A @ B with A (rows x inner), B (inner x cols), C (rows x cols); C is overwritten.
template <class Isa, typename T>
TT_INLINE void matmul(const T* TT_RESTRICT A, const T* TT_RESTRICT B, T* TT_RESTRICT C,
                      int64_t rows, int64_t inner, int64_t cols) {
  path_row_combinations<Isa>(A, B, C, rows, inner, cols, inner, 1, false);
}

// C += A @ B with A (rows x inner), B (inner x cols), C (rows x cols).
template <class Isa, typename T>
TT_INLINE void matmul_acc(const T* TT_RESTRICT A, const T* TT_RESTRICT B, T* TT_RESTRICT C,
                          int64_t rows, int64_t inner, int64_t cols) {
  path_row_combinations<Isa>(A, B, C, rows, inner, cols, inner, 1, true);
}

// C (=, or += when `accumulate`) AT^T @ B with A given transposed as AT (inner x rows), B
// (inner x cols), C (rows x cols): row a of C is a combination of the rows of B with the
// weights AT[:, a].
template <class Isa, typename T>
TT_INLINE void matmul_t(const T* TT_RESTRICT AT, const T* TT_RESTRICT B, T* TT_RESTRICT C,
                        int64_t rows, int64_t inner, int64_t cols, bool accumulate) {
  path_row_combinations<Isa>(AT, B, C, rows, inner, cols, 1, rows, accumulate);
}

// dB += A^T @ dC with A (rows x inner), dC (rows x cols), dB (inner x cols): row q of dB is a
// combination of the rows of dC with the weights A[:, q].
template <class Isa, typename T>
TT_INLINE void matmul_tn_acc(const T* TT_RESTRICT A, const T* TT_RESTRICT dC, T* TT_RESTRICT dB,
                             int64_t rows, int64_t inner, int64_t cols) {
  path_row_combinations<Isa>(A, dC, dB, inner, rows, cols, 1, inner, true);
}

// dA += dC @ B^T with dC (rows x cols), B^T given transposed as BT (cols x inner), dA (rows x
// inner).
template <class Isa, typename T>
TT_INLINE void matmul_nt_acc(const T* TT_RESTRICT dC, const T* TT_RESTRICT BT, T* TT_RESTRICT dA,
                             int64_t rows, int64_t inner, int64_t cols) {
  path_row_combinations<Isa>(dC, BT, dA, rows, cols, inner, cols, 1, true);
}

// dB^T += (A^T @ dC)^T, i.e. dBT (cols x inner) += dC^T @ A, with A (rows x inner) and dC
// (rows x cols): the slice gradient of a step with few columns (the last core's), kept
// transposed so that its rows are long (`inner`) and, few as they are, all in registers at once.
template <class Isa, typename T>
TT_INLINE void matmul_tn_acc_transposed(const T* TT_RESTRICT A, const T* TT_RESTRICT dC,
                                        T* TT_RESTRICT dBT, int64_t rows, int64_t inner,
                                        int64_t cols) {
  path_row_combinations<Isa>(dC, A, dBT, cols, rows, inner, 1, cols, true);
}

// Two-input lane shuffle of 4-lane vectors with constant lane indices (0-3: a, 4-7: b).
#if defined(__clang__)
#define TT_SHUFFLE4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#elif defined(__GNUC__)
#define TT_SHUFFLE4(a, b, i0, i1, i2, i3) \
  __builtin_shuffle(a, b, typename VecType<Lane, sizeof(a)>::type{i0, i1, i2, i3})
#endif

// dst (cols x rows) = src (rows x cols) transposed. With rows and cols multiples of 4, in 4 x 4
// blocks of vectors (loads, lane shuffles, stores of whole vectors): a transposed row written
// with scalar stores and then read back with vector loads (the streaming copy of a row) stalls,
// each load waiting for several stores it cannot be forwarded from.
template <typename T>
TT_INLINE void transpose(const T* TT_RESTRICT src, T* TT_RESTRICT dst, int64_t rows,
                         int64_t cols) {
#if defined(TT_SHUFFLE4)
  if (rows % 4 == 0 && cols % 4 == 0) {
    using V = Vec<T, 4 * sizeof(T)>;
    using Lane = typename std::conditional<sizeof(T) == 4, int32_t, int64_t>::type;
    for (int64_t i = 0; i < rows; i += 4) {
      for (int64_t j = 0; j < cols; j += 4) {
        const V r0 = vload<V>(src + (i + 0) * cols + j);
        const V r1 = vload<V>(src + (i + 1) * cols + j);
        const V r2 = vload<V>(src + (i + 2) * cols + j);
        const V r3 = vload<V>(src + (i + 3) * cols + j);
        const V t0 = TT_SHUFFLE4(r0, r1, 0, 4, 1, 5);
        const V t1 = TT_SHUFFLE4(r0, r1, 2, 6, 3, 7);
        const V t2 = TT_SHUFFLE4(r2, r3, 0, 4, 1, 5);
        const V t3 = TT_SHUFFLE4(r2, r3, 2, 6, 3, 7);
        vstore(dst + (j + 0) * rows + i, V(TT_SHUFFLE4(t0, t2, 0, 1, 4, 5)));
        vstore(dst + (j + 1) * rows + i, V(TT_SHUFFLE4(t0, t2, 2, 3, 6, 7)));
        vstore(dst + (j + 2) * rows + i, V(TT_SHUFFLE4(t1, t3, 0, 1, 4, 5)));
        vstore(dst + (j + 3) * rows + i, V(TT_SHUFFLE4(t1, t3, 2, 3, 6, 7)));
      }
    }
    return;
  }
#endif
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
  }
}

// ------------------------------------------------------------------ the last core, tiled
//
// The last step `row (M x m) = A (M x r) @ B (r x m)` has a short contiguous axis (m, the last
// column factor, since r_K = 1), which vectorises poorly. Spread both operands over the D = M m
// output elements instead,
//     A_exp[q][a m + c] = A[a][q]             (built once per prefix),
//     B_per[q][b]       = B[q][b mod m]       (once per slice of the last core),
// where B_per has a period P that m divides and that divides D: output element i then reads
// B_per[q][i mod P], and the step is D-long elementwise products,
//     row[i] = sum_q A_exp[q][i] B_per[q][i mod P].
// With P = kFastPeriod (whenever m divides it and D is a multiple of it) the slice's tile is
// r x P scalars and stays in registers; otherwise P = D. (The backward needs no such layout: the
// slice's gradient is matmul_tn_acc_transposed and the prefix's matmul_nt_acc, both
// register-resident.)

constexpr int64_t kFastPeriod = 16;

// The period P used for a last step with column factor m and row length dim.
inline int64_t tile_period(int64_t m, int64_t dim) {
  return (kFastPeriod % m == 0 && dim % kFastPeriod == 0) ? kFastPeriod : dim;
}

// A (rows x inner) -> A_exp (inner x rows*m).
template <int64_t kM, typename T>
TT_INLINE void spread_rows_fixed(const T* TT_RESTRICT A, T* TT_RESTRICT A_exp, int64_t rows,
                                 int64_t inner) {
  for (int64_t q = 0; q < inner; ++q) {
    T* TT_RESTRICT dst = A_exp + q * rows * kM;
    for (int64_t a = 0; a < rows; ++a) {
      const T value = A[a * inner + q];
      for (int64_t c = 0; c < kM; ++c) dst[a * kM + c] = value;
    }
  }
}

template <typename T>
TT_INLINE void spread_rows(const T* TT_RESTRICT A, T* TT_RESTRICT A_exp, int64_t rows,
                           int64_t inner, int64_t m) {
  switch (m) {
    case 1: spread_rows_fixed<1>(A, A_exp, rows, inner); return;
    case 2: spread_rows_fixed<2>(A, A_exp, rows, inner); return;
    case 4: spread_rows_fixed<4>(A, A_exp, rows, inner); return;
    case 8: spread_rows_fixed<8>(A, A_exp, rows, inner); return;
    default: break;
  }
  const int64_t dim = rows * m;
  for (int64_t q = 0; q < inner; ++q) {
    T* TT_RESTRICT dst = A_exp + q * dim;
    for (int64_t a = 0; a < rows; ++a) {
      const T value = A[a * inner + q];
      for (int64_t c = 0; c < m; ++c) dst[a * m + c] = value;
    }
  }
}

// B (inner x m) -> B_per (inner x period).
template <typename T>
TT_INLINE void tile_cols(const T* TT_RESTRICT B, T* TT_RESTRICT B_per, int64_t inner, int64_t m,
                         int64_t period) {
  for (int64_t q = 0; q < inner; ++q) {
    for (int64_t b = 0; b < period; ++b) B_per[q * period + b] = B[q * m + b % m];
  }
}

// kChunk outputs from i on, in registers: row[i + c] = sum_q A_exp[q][i + c] B_per[q][c mod P].
template <class Isa, int64_t kChunk, typename T>
TT_INLINE void tiled_chunk(const T* TT_RESTRICT A_exp, const T* TT_RESTRICT B_per,
                           T* TT_RESTRICT row, int64_t inner, int64_t dim, int64_t i) {
  constexpr int64_t kBytes = row_vector_bytes<Isa, T, kFastPeriod>();
  constexpr int64_t kLanes = kBytes / sizeof(T);
  constexpr int64_t kVecs = kChunk / kLanes;
  constexpr int64_t kPeriodVecs = kFastPeriod / kLanes;
  using V = Vec<T, kBytes>;
  V acc[kVecs];
  TT_UNROLL
  for (int64_t v = 0; v < kVecs; ++v) acc[v] = V{};
  for (int64_t q = 0; q < inner; ++q) {
    const T* TT_RESTRICT a = A_exp + q * dim + i;
    V p[kPeriodVecs];
    TT_UNROLL
    for (int64_t v = 0; v < kPeriodVecs; ++v) p[v] = vload<V>(B_per + q * kFastPeriod + v * kLanes);
    TT_UNROLL
    for (int64_t v = 0; v < kVecs; ++v) acc[v] += vload<V>(a + v * kLanes) * p[v % kPeriodVecs];
  }
  TT_UNROLL
  for (int64_t v = 0; v < kVecs; ++v) vstore(row + i + v * kLanes, acc[v]);
}

// row[i] = sum_q A_exp[q][i] * B_per[q][i mod period], i < dim.
template <class Isa, typename T>
TT_INLINE void tiled_product(const T* TT_RESTRICT A_exp, const T* TT_RESTRICT B_per,
                             T* TT_RESTRICT row, int64_t inner, int64_t dim, int64_t period) {
  if (period == kFastPeriod) {
    // Outputs in registers at a time: a block's worth, a multiple of the period.
    constexpr int64_t kChunk = std::max<int64_t>(
        kFastPeriod, Isa::kBlockBytes / static_cast<int64_t>(sizeof(T)) / kFastPeriod * kFastPeriod);
    int64_t i = 0;
    for (; i + kChunk <= dim; i += kChunk) tiled_chunk<Isa, kChunk>(A_exp, B_per, row, inner, dim, i);
    for (; i < dim; i += kFastPeriod) tiled_chunk<Isa, kFastPeriod>(A_exp, B_per, row, inner, dim, i);
    return;
  }
  for (int64_t i = 0; i < dim; ++i) {
    const int64_t b = i % period;
    T acc = A_exp[i] * B_per[b];
    for (int64_t q = 1; q < inner; ++q) acc += A_exp[q * dim + i] * B_per[q * period + b];
    row[i] = acc;
  }
}

}  // namespace cpu
}  // namespace ttgnn
