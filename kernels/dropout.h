// Declarations shared by the dropout schema (dropout.cpp) and its CPU kernel.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace ttgnn {

// Validates the input of ttgnn::dropout: x float32 or float64, p in [0, 1).
void check_dropout(const at::Tensor& x, double p);

// The 64 random bits of counter `k` of stream `seed`: SplitMix64's output function of
// seed + (k + 1) * golden gamma (Steele, Lea and Flood, 2014), a bijection of the counter whose
// bits each flip with probability about 1/2 when one input bit does.
inline uint64_t dropout_bits(uint64_t seed, uint64_t k) {
  uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace ttgnn
