// CPU kernel of ttgnn::dropout (schema and contract: kernels/dropout.cpp).
//
// Elements are taken in pairs: pair k draws dropout_bits(seed, k) once, element 2k is kept when
// the low 32 bits are at least p * 2^32 and element 2k + 1 when the high 32 bits are. Threads take
// contiguous ranges of pairs; a decision depends on (seed, position) only, never on the split.
// The loop is compiled once per instruction-set path (cpu/cpu_isa.h), as the other CPU kernels
// are, and vectorised on each: AVX-512 multiplies the 64-bit draws in vector registers, AVX2 and
// SSE2 build each 64-bit product from 32-bit ones.
// torch's CPU dropout draws from its Mersenne Twister one element at a time on one thread (Intel
// CPUs with MKL excepted), which was 6-13% of a GNN epoch on ogbn-arxiv on an AMD EPYC.
#include <cmath>
#include <cstdint>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include "../dropout.h"
#include "../tt_lookup_math.h"
#include "tt_lookup_cpu_tuning.h"

namespace ttgnn {
namespace {

constexpr int64_t kGrainPairs = 1 << 14;

// The factor of an element whose 32 random bits are `bits`: `scale` when kept, 0 when dropped (the
// element becomes x * 0, as in torch's dropout: a NaN stays NaN).
template <typename T>
TT_INLINE T keep_factor(uint32_t bits, uint32_t threshold, T scale) {
  return bits >= threshold ? scale : T(0);
}

// Pairs [first, last): element 2k is kept when the low 32 bits of pair k's draw are at least
// `threshold`, element 2k + 1 when the high 32 bits are. Inlined into one entry per
// instruction-set path.
template <typename T>
TT_INLINE void dropout_range(const T* TT_RESTRICT x, T* TT_RESTRICT out, int64_t first, int64_t last,
                             uint64_t seed, uint32_t threshold, T scale) {
  TT_SIMD
  for (int64_t k = first; k < last; ++k) {
    const uint64_t bits = dropout_bits(seed, static_cast<uint64_t>(k));
    out[2 * k] = x[2 * k] * keep_factor(static_cast<uint32_t>(bits), threshold, scale);
    out[2 * k + 1] = x[2 * k + 1] * keep_factor(static_cast<uint32_t>(bits >> 32), threshold, scale);
  }
}

#if TT_CPU_MULTI_ISA
template <typename T>
TT_TARGET_AVX512 void dropout_avx512(const T* x, T* out, int64_t first, int64_t last, uint64_t seed,
                                     uint32_t threshold, T scale) {
  dropout_range(x, out, first, last, seed, threshold, scale);
}
template <typename T>
TT_TARGET_AVX2 void dropout_avx2(const T* x, T* out, int64_t first, int64_t last, uint64_t seed,
                                 uint32_t threshold, T scale) {
  dropout_range(x, out, first, last, seed, threshold, scale);
}
#endif
template <typename T>
void dropout_baseline(const T* x, T* out, int64_t first, int64_t last, uint64_t seed, uint32_t threshold,
                      T scale) {
  dropout_range(x, out, first, last, seed, threshold, scale);
}

// The entry of the active instruction-set path (cpu/cpu_isa.h).
template <typename T>
auto dropout_entry() {
  switch (cpu_isa_active()) {
#if TT_CPU_MULTI_ISA
    case CpuIsa::kAvx512: return &dropout_avx512<T>;
    case CpuIsa::kAvx2: return &dropout_avx2<T>;
#endif
    default: return &dropout_baseline<T>;
  }
}

at::Tensor dropout_cpu(const at::Tensor& x_in, double p, int64_t seed) {
  check_dropout(x_in, p);
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t numel = x.numel();
  if (numel == 0) return out;
  // keep when 32 random bits u >= p * 2^32: probability 1 - p (to 2^-32)
  const uint32_t threshold = static_cast<uint32_t>(std::floor(p * 4294967296.0));
  const uint64_t stream = static_cast<uint64_t>(seed);
  const int64_t pairs = numel / 2;  // whole pairs; an odd count's last element after them
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ttgnn_dropout", [&] {
    const scalar_t scale = static_cast<scalar_t>(1.0 / (1.0 - p));
    const scalar_t* src = x.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    const auto entry = dropout_entry<scalar_t>();
    at::parallel_for(0, pairs, kGrainPairs, [&](int64_t first, int64_t last) {
      entry(src, dst, first, last, stream, threshold, scale);
    });
    if (numel % 2 == 1) {  // the low half of pair `pairs`'s draw, as if it had a mate
      const uint64_t bits = dropout_bits(stream, static_cast<uint64_t>(pairs));
      dst[numel - 1] = src[numel - 1] * keep_factor(static_cast<uint32_t>(bits), threshold, scale);
    }
  });
  return out;
}

}  // namespace
}  // namespace ttgnn

TORCH_LIBRARY_IMPL(ttgnn, CPU, m) {
  m.impl("dropout", &ttgnn::dropout_cpu);
}
