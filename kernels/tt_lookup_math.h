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
// The CPU kernels may also contract a row from the last core on (right to left, for rows that
// share no prefix; see cpu/tt_lookup_cpu.cpp): the same sums over the ranks, grouped the other
// way, so its results agree with this order's to rounding.
//
// This header holds the shapes and the single-element form of each product (`*_elem`: one
// output element, which a CUDA thread computes). The CPU computes whole products with explicit
// vectors (cpu/tt_lookup_cpu_math.h). Both sum in the same order over the contracted axis, so
// CPU and CUDA agree to rounding.
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

// Forced inlining, so that the CPU kernels' per-ISA entry functions inline the math and
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
