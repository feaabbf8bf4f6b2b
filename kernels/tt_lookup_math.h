// Per-row arithmetic of the TT lookup, shared by the CPU (C++) and CUDA kernels.
//
// A TT table with K cores G_0..G_{K-1}, core k of shape (n_k, r_k, m_k, r_{k+1}) with
// r_0 = r_K = 1 (row-major, contiguous). Row i has digits (t_0, ..., t_{K-1}) in mixed radix,
// t_0 most significant (see ttgnn/shapes.py), and
//
//     P_0 = G_0[t_0]                       viewed as (m_0, r_1)
//     P_k = P_{k-1} @ G_k[t_k]             (M_{k-1} x r_k) @ (r_k x m_k r_{k+1}) -> (M_k, r_{k+1})
//     row i = P_{K-1}                      (M_{K-1} = D = m_0 ... m_{K-1}, r_K = 1)
//
// where M_k = m_0 ... m_k. Viewing the product (M_{k-1} x m_k r_{k+1}) as (M_k x r_{k+1}) is a
// free reshape of the row-major buffer, and it keeps the output columns in the digit order of
// the column shape. Every step is therefore a plain row-major matrix product
// `C (rows x cols) = A (rows x inner) @ B (inner x cols)`, and its backward is
// `dB += A^T dC` (the slice gradient) and `dA += dC B^T` (the gradient of the shorter prefix).
//
// Two forms of each product live here:
//   * `*_rows` loops: a whole product with the contiguous `cols` axis innermost (axpy form, no
//     reductions), which compilers vectorise on the CPU;
//   * `*_elem` functions: one output element, which a CUDA thread computes.
// Both sum in the same order over the contracted axis, so CPU and CUDA agree to rounding.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TT_HOST_DEVICE __host__ __device__
#else
#define TT_HOST_DEVICE
#endif

#if defined(__CUDACC__) || defined(__GNUC__) || defined(__clang__)
#define TT_RESTRICT __restrict__
#else
#define TT_RESTRICT
#endif

// Forced inlining, so that the CPU kernels' per-ISA clones (target_clones) inline the math and
// vectorise it for their instruction set.
#if defined(__CUDACC__)
#define TT_INLINE __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define TT_INLINE inline __attribute__((always_inline))
#else
#define TT_INLINE inline
#endif

// Fully unrolls a loop with a compile-time trip count, so that its array stays in registers.
#if defined(__CUDA_ARCH__)
#define TT_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__)
#define TT_UNROLL _Pragma("GCC unroll 64")
#elif defined(__clang__)
#define TT_UNROLL _Pragma("unroll")
#else
#define TT_UNROLL
#endif

// Lets the host compiler vectorise a loop (reductions and FMAs included) under -fopenmp.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#define TT_SIMD _Pragma("omp simd")
#else
#define TT_SIMD
#endif

namespace ttgnn {

// Most cores a kernel accepts (shape arrays are passed by value to CUDA kernels).
constexpr int kMaxCores = 8;

// Shape of a TT table, by value (small enough for a CUDA kernel argument).
struct TTDims {
  int num_cores;                // K
  int64_t n[kMaxCores];         // slices of core k (row shape)
  int64_t m[kMaxCores];         // column factor of core k (column shape)
  int64_t r[kMaxCores + 1];     // ranks, r[0] = r[K] = 1
  int64_t prefix_cols[kMaxCores];  // M_k = m_0 * ... * m_k
  int64_t num_rows;             // n_0 * ... * n_{K-1}
  int64_t dim;                  // D = M_{K-1}

  // Scalars in one slice of core k.
  TT_HOST_DEVICE int64_t slice_size(int k) const { return r[k] * m[k] * r[k + 1]; }
  // Scalars in the partial product P_k, i.e. M_k * r_{k+1}.
  TT_HOST_DEVICE int64_t partial_size(int k) const { return prefix_cols[k] * r[k + 1]; }
};

// Digits of `row`, first digit most significant: digits[k] selects a slice of core k.
TT_HOST_DEVICE TT_INLINE void tt_row_digits(int64_t row, const TTDims& dims, int64_t* digits) {
  for (int k = dims.num_cores - 1; k >= 0; --k) {
    digits[k] = row % dims.n[k];
    row /= dims.n[k];
  }
}

// The prefix of `row` made of its first k+1 digits (t_0 ... t_k) as one number.
TT_HOST_DEVICE TT_INLINE int64_t tt_row_prefix(int64_t row, const TTDims& dims, int k) {
  for (int j = dims.num_cores - 1; j > k; --j) row /= dims.n[j];
  return row;
}

// ---------------------------------------------------------------- whole products (CPU form)

// y[0:n] += alpha * x[0:n], with fixed-length loops for the common lengths (ranks and column
// factors), which the compiler unrolls and vectorises without a runtime trip count.
template <int64_t kN, typename T>
TT_HOST_DEVICE TT_INLINE void tt_axpy_fixed(T* TT_RESTRICT y, const T* TT_RESTRICT x, T alpha) {
  for (int64_t j = 0; j < kN; ++j) y[j] += alpha * x[j];
}

template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_axpy(T* TT_RESTRICT y, const T* TT_RESTRICT x, T alpha,
                                      int64_t n) {
  switch (n) {
    case 4: tt_axpy_fixed<4>(y, x, alpha); return;
    case 8: tt_axpy_fixed<8>(y, x, alpha); return;
    case 16: tt_axpy_fixed<16>(y, x, alpha); return;
    case 32: tt_axpy_fixed<32>(y, x, alpha); return;
    case 64: tt_axpy_fixed<64>(y, x, alpha); return;
    default: break;
  }
  TT_SIMD
  for (int64_t j = 0; j < n; ++j) y[j] += alpha * x[j];
}


// A (kRows x kCols) block between memory (row-major, contiguous) and registers.
template <int64_t kRows, int64_t kCols, typename T>
TT_HOST_DEVICE TT_INLINE void tt_load_block(const T* TT_RESTRICT src, T (&block)[kRows][kCols]) {
  TT_UNROLL
  for (int64_t r = 0; r < kRows; ++r) {
    TT_SIMD
    for (int64_t j = 0; j < kCols; ++j) block[r][j] = src[r * kCols + j];
  }
}

template <int64_t kRows, int64_t kCols, typename T>
TT_HOST_DEVICE TT_INLINE void tt_store_block(const T (&block)[kRows][kCols], T* TT_RESTRICT dst) {
  TT_UNROLL
  for (int64_t r = 0; r < kRows; ++r) {
    TT_SIMD
    for (int64_t j = 0; j < kCols; ++j) dst[r * kCols + j] = block[r][j];
  }
}

// Row combinations: out[a][0:width] (=, or += when `accumulate`) sum_k X(a, k) M[k][0:width],
// with X(a, k) = X[a * xr + k * xk] (xr = terms, xk = 1: X is (rows x terms), row-major; xr = 1,
// xk = rows: X is given transposed), M (terms x width), out (rows x width). For the common widths
// a row of `out` stays in registers across the sum over k (as a loop over the memory row, every
// step would wait for the previous step's store); when the number of terms is small and fixed
// too, M stays in registers as well (tt_row_combinations_small).
template <int64_t kWidth, int64_t kTerms, typename T>
TT_HOST_DEVICE TT_INLINE void tt_row_combinations_small(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                                        T* TT_RESTRICT out, int64_t rows,
                                                        int64_t xr, int64_t xk, bool accumulate) {
  T m[kTerms][kWidth];
  tt_load_block(M, m);
  for (int64_t a = 0; a < rows; ++a) {
    const T* TT_RESTRICT x = X + a * xr;
    T* TT_RESTRICT o = out + a * kWidth;
    T acc[kWidth];
    TT_SIMD
    for (int64_t j = 0; j < kWidth; ++j) acc[j] = accumulate ? o[j] : T(0);
    TT_UNROLL
    for (int64_t k = 0; k < kTerms; ++k) {
      const T alpha = x[k * xk];
      TT_SIMD
      for (int64_t j = 0; j < kWidth; ++j) acc[j] += alpha * m[k][j];
    }
    TT_SIMD
    for (int64_t j = 0; j < kWidth; ++j) o[j] = acc[j];
  }
}

// kRows rows of a row combination (see tt_row_combinations), all in registers.
template <int64_t kWidth, int64_t kRows, typename T>
TT_HOST_DEVICE TT_INLINE void tt_row_combinations_block(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                                        T* TT_RESTRICT out, int64_t terms,
                                                        int64_t xr, int64_t xk, bool accumulate) {
  T acc[kRows][kWidth];
  if (accumulate) {
    tt_load_block(out, acc);
  } else {
    TT_UNROLL
    for (int64_t r = 0; r < kRows; ++r) {
      TT_SIMD
      for (int64_t j = 0; j < kWidth; ++j) acc[r][j] = T(0);
    }
  }
  for (int64_t k = 0; k < terms; ++k) {
    const T* TT_RESTRICT m = M + k * kWidth;
    TT_UNROLL
    for (int64_t r = 0; r < kRows; ++r) {
      const T alpha = X[r * xr + k * xk];
      TT_SIMD
      for (int64_t j = 0; j < kWidth; ++j) acc[r][j] += alpha * m[j];
    }
  }
  tt_store_block(acc, out);
}

// All `rows` rows in blocks of kRows, the rest in one block each of kRows / 2, kRows / 4, ...
template <int64_t kWidth, int64_t kRows, typename T>
TT_HOST_DEVICE TT_INLINE void tt_row_combinations_blocks(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                                         T* TT_RESTRICT out, int64_t rows,
                                                         int64_t terms, int64_t xr, int64_t xk,
                                                         bool accumulate) {
  int64_t a = 0;
  for (; a + kRows <= rows; a += kRows) {
    tt_row_combinations_block<kWidth, kRows>(X + a * xr, M, out + a * kWidth, terms, xr, xk,
                                             accumulate);
  }
  if constexpr (kRows > 1) {
    if (a < rows) {
      tt_row_combinations_blocks<kWidth, kRows / 2>(X + a * xr, M, out + a * kWidth, rows - a,
                                                    terms, xr, xk, accumulate);
    }
  }
}

template <int64_t kWidth, typename T>
TT_HOST_DEVICE TT_INLINE void tt_row_combinations_fixed(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                                        T* TT_RESTRICT out, int64_t rows,
                                                        int64_t terms, int64_t xr, int64_t xk,
                                                        bool accumulate) {
  if (kWidth <= 32) {
    switch (terms) {
      case 2: tt_row_combinations_small<kWidth, 2>(X, M, out, rows, xr, xk, accumulate); return;
      case 4: tt_row_combinations_small<kWidth, 4>(X, M, out, rows, xr, xk, accumulate); return;
      case 8: tt_row_combinations_small<kWidth, 8>(X, M, out, rows, xr, xk, accumulate); return;
      default: break;
    }
  }
  // Up to 128 scalars of rows at a time: with many terms one row's sum is a long chain of
  // dependent FMAs, longer than the out-of-order window, so rows would not overlap; several
  // chains side by side do.
  tt_row_combinations_blocks<kWidth, (kWidth >= 128 ? 1 : 128 / kWidth)>(X, M, out, rows, terms,
                                                                           xr, xk, accumulate);
}

template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_row_combinations(const T* TT_RESTRICT X, const T* TT_RESTRICT M,
                                                  T* TT_RESTRICT out, int64_t rows, int64_t terms,
                                                  int64_t width, int64_t xr, int64_t xk,
                                                  bool accumulate) {
  switch (width) {
    case 4: tt_row_combinations_fixed<4>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 8: tt_row_combinations_fixed<8>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 16: tt_row_combinations_fixed<16>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 32: tt_row_combinations_fixed<32>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 64: tt_row_combinations_fixed<64>(X, M, out, rows, terms, xr, xk, accumulate); return;
    case 128: tt_row_combinations_fixed<128>(X, M, out, rows, terms, xr, xk, accumulate); return;
    default: break;
  }
  for (int64_t a = 0; a < rows; ++a) {
    T* TT_RESTRICT o = out + a * width;
    if (!accumulate) {
      TT_SIMD
      for (int64_t j = 0; j < width; ++j) o[j] = T(0);
    }
    for (int64_t k = 0; k < terms; ++k) tt_axpy(o, M + k * width, X[a * xr + k * xk], width);
  }
}

// C = A @ B with A (rows x inner), B (inner x cols), C (rows x cols); C is overwritten.
template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_matmul_rows(const T* TT_RESTRICT A, const T* TT_RESTRICT B,
                                          T* TT_RESTRICT C, int64_t rows, int64_t inner,
                                          int64_t cols) {
  tt_row_combinations(A, B, C, rows, inner, cols, inner, 1, false);
}

// dB += A^T @ dC with A (rows x inner), dC (rows x cols), dB (inner x cols): row q of dB is a
// combination of the rows of dC with the weights A[:, q].
template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_matmul_tn_acc_rows(const T* TT_RESTRICT A, const T* TT_RESTRICT dC,
                                                 T* TT_RESTRICT dB, int64_t rows, int64_t inner,
                                                 int64_t cols) {
  tt_row_combinations(A, dC, dB, inner, rows, cols, 1, inner, true);
}

// dA += dC @ B^T with dC (rows x cols), B^T given transposed as BT (cols x inner), dA (rows x inner).
template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_matmul_nt_acc_rows(const T* TT_RESTRICT dC, const T* TT_RESTRICT BT,
                                                 T* TT_RESTRICT dA, int64_t rows, int64_t inner,
                                                 int64_t cols) {
  tt_row_combinations(dC, BT, dA, rows, cols, inner, cols, 1, true);
}

// dB^T += (A^T @ dC)^T, i.e. dBT (cols x inner) += dC^T @ A, with A (rows x inner) and dC
// (rows x cols): the slice gradient of a step with few columns (the last core's), kept
// transposed so that its rows are long (`inner`) and, few as they are, all in registers at once.
template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_matmul_tn_acc_transposed(const T* TT_RESTRICT A,
                                                          const T* TT_RESTRICT dC,
                                                          T* TT_RESTRICT dBT, int64_t rows,
                                                          int64_t inner, int64_t cols) {
  tt_row_combinations(dC, A, dBT, cols, rows, inner, 1, cols, true);
}

// ---------------------------------------------------------------- the last core, tiled (CPU form)
//
// The last step `row (M x m) = A (M x r) @ B (r x m)` has a short contiguous axis (m, the last
// column factor, since r_K = 1), which vectorises poorly. Spread both operands over the D = M m
// output elements instead,
//     A_exp[q][a m + c] = A[a][q]             (built once per prefix),
//     B_per[q][b]       = B[q][b mod m]       (once per slice of the last core),
// where B_per has a period P that m divides and that divides D: output element i then reads
// B_per[q][i mod P], and the step is D-long elementwise products,
//     row[i] = sum_q A_exp[q][i] B_per[q][i mod P].
// With P = 16 (whenever m divides 16 and 64 divides D) the slice's tile is r x 16 scalars, stays
// in L1 and in registers; otherwise P = D. (The backward needs no such layout: the slice's
// gradient is tt_matmul_tn_acc_transposed and the prefix's tt_matmul_nt_acc_rows, both
// register-resident.)

// The period P used for a last step with column factor m and row length dim.
constexpr int64_t kFastPeriod = 16;
constexpr int64_t kChunk = 64;  // outputs kept in registers at a time (a multiple of kFastPeriod)

TT_HOST_DEVICE TT_INLINE int64_t tt_tile_period(int64_t m, int64_t dim) {
  return (kFastPeriod % m == 0 && dim % kChunk == 0) ? kFastPeriod : dim;
}

// A (rows x inner) -> A_exp (inner x rows*m).
template <int64_t kM, typename T>
TT_HOST_DEVICE TT_INLINE void tt_spread_rows_fixed(const T* TT_RESTRICT A, T* TT_RESTRICT A_exp,
                                                   int64_t rows, int64_t inner) {
  for (int64_t q = 0; q < inner; ++q) {
    T* TT_RESTRICT dst = A_exp + q * rows * kM;
    for (int64_t a = 0; a < rows; ++a) {
      const T value = A[a * inner + q];
      for (int64_t c = 0; c < kM; ++c) dst[a * kM + c] = value;
    }
  }
}

template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_spread_rows(const T* TT_RESTRICT A, T* TT_RESTRICT A_exp,
                                             int64_t rows, int64_t inner, int64_t m) {
  switch (m) {
    case 1: tt_spread_rows_fixed<1>(A, A_exp, rows, inner); return;
    case 2: tt_spread_rows_fixed<2>(A, A_exp, rows, inner); return;
    case 4: tt_spread_rows_fixed<4>(A, A_exp, rows, inner); return;
    case 8: tt_spread_rows_fixed<8>(A, A_exp, rows, inner); return;
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
TT_HOST_DEVICE TT_INLINE void tt_tile_cols(const T* TT_RESTRICT B, T* TT_RESTRICT B_per,
                                           int64_t inner, int64_t m, int64_t period) {
  for (int64_t q = 0; q < inner; ++q) {
    for (int64_t b = 0; b < period; ++b) B_per[q * period + b] = B[q * m + b % m];
  }
}

// row[i] = sum_q A_exp[q][i] * B_per[q][i mod period], i < dim.
template <typename T>
TT_HOST_DEVICE TT_INLINE void tt_tiled_product(const T* TT_RESTRICT A_exp,
                                               const T* TT_RESTRICT B_per, T* TT_RESTRICT row,
                                               int64_t inner, int64_t dim, int64_t period) {
  int64_t i = 0;
  if (period == kFastPeriod) {
    for (; i + kChunk <= dim; i += kChunk) {
      T acc[kChunk];
      TT_UNROLL
      for (int64_t k = 0; k < kChunk; k += kFastPeriod) {
        TT_SIMD
        for (int64_t b = 0; b < kFastPeriod; ++b) acc[k + b] = A_exp[i + k + b] * B_per[b];
      }
      for (int64_t q = 1; q < inner; ++q) {
        const T* TT_RESTRICT a = A_exp + q * dim + i;
        const T* TT_RESTRICT p = B_per + q * kFastPeriod;
        TT_UNROLL
        for (int64_t k = 0; k < kChunk; k += kFastPeriod) {
          TT_SIMD
          for (int64_t b = 0; b < kFastPeriod; ++b) acc[k + b] += a[k + b] * p[b];
        }
      }
      TT_UNROLL
      for (int64_t b = 0; b < kChunk; ++b) row[i + b] = acc[b];
    }
  }
  for (; i < dim; ++i) {
    const int64_t b = i % period;
    T acc = A_exp[i] * B_per[b];
    for (int64_t q = 1; q < inner; ++q) acc += A_exp[q * dim + i] * B_per[q * period + b];
    row[i] = acc;
  }
}

// ---------------------------------------------------------------- single elements (CUDA form)

// (A @ B)[a, j], A (rows x inner), B (inner x cols).
template <typename T>
TT_HOST_DEVICE TT_INLINE T tt_matmul_elem(const T* A, const T* B, int64_t a, int64_t j,
                                       int64_t inner, int64_t cols) {
  T acc = A[a * inner] * B[j];
  for (int64_t q = 1; q < inner; ++q) acc += A[a * inner + q] * B[q * cols + j];
  return acc;
}

// (A^T @ dC)[q, j], A (rows x inner), dC (rows x cols).
template <typename T>
TT_HOST_DEVICE TT_INLINE T tt_matmul_tn_elem(const T* A, const T* dC, int64_t q, int64_t j,
                                          int64_t rows, int64_t inner, int64_t cols) {
  T acc = T(0);
  for (int64_t a = 0; a < rows; ++a) acc += A[a * inner + q] * dC[a * cols + j];
  return acc;
}

// (dC @ B^T)[a, q], dC (rows x cols), B (inner x cols).
template <typename T>
TT_HOST_DEVICE TT_INLINE T tt_matmul_nt_elem(const T* dC, const T* B, int64_t a, int64_t q,
                                          int64_t cols) {
  T acc = T(0);
  for (int64_t j = 0; j < cols; ++j) acc += dC[a * cols + j] * B[q * cols + j];
  return acc;
}

}  // namespace ttgnn
