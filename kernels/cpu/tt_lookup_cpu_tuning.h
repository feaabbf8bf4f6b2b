// The CPU kernels' instruction-set paths and what each is tuned with.
//
// A path is a set of compiler target flags plus the block sizes and distances that suit the
// register file of that instruction set. The kernels' hot loops are templates on the path
// (`Isa` below), forced inline into one entry function per path that carries the target flags
// (TT_TARGET_*), so that each path's copy is vectorised for its instruction set; the dispatch in
// tt_lookup_cpu.cpp calls the entry of the active path (cpu_isa.h).
#pragma once

#include <cstdint>

#include "cpu_isa.h"

// Portable x86-64 builds with GCC 12 or newer (which knows the x86-64-v3/v4 levels) carry the
// three paths; a TTGNN_NATIVE=1 build, another architecture or another compiler carries one.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && \
    !defined(TTGNN_NATIVE_BUILD)
#define TT_CPU_MULTI_ISA 1
#define TT_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define TT_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#else
#define TT_CPU_MULTI_ISA 0
#endif

namespace ttgnn {

#if !TT_CPU_MULTI_ISA
// The one path of a single-path build.
#if defined(TTGNN_NATIVE_BUILD)
constexpr CpuIsa kSinglePath = CpuIsa::kNative;
#else
constexpr CpuIsa kSinglePath = CpuIsa::kBaseline;
#endif
#endif

// What a path is tuned with.
//   kVectorBytes     bytes of one vector register;
//   kBlockBytes      bytes of accumulators a register-resident block may hold (the rest of the
//                    register file holds the operands being streamed in): half the register file
//                    on AVX-512 (32 x 64 bytes), and on AVX2 and SSE2 (16 registers each) 8 of
//                    the 16, since a block larger than the file spills every accumulator to the
//                    stack on every term;
//   kPrefetchAhead   how many positions ahead the backward's gather prefetches output
//                    gradients (each a row of the batch, 512 bytes at D = 128 in float32);
//   kGatherRows      unique rows whose output gradients are gathered at a time, before
//                    computing with them (they should stay in L1/L2 until used).
struct IsaBaseline {
  static constexpr CpuIsa kIsa = CpuIsa::kBaseline;
  static constexpr int64_t kVectorBytes = 16;
  static constexpr int64_t kBlockBytes = 8 * 16;
  static constexpr int64_t kPrefetchAhead = 6;
  static constexpr int64_t kGatherRows = 64;
};

struct IsaAvx2 {
  static constexpr CpuIsa kIsa = CpuIsa::kAvx2;
  static constexpr int64_t kVectorBytes = 32;
  static constexpr int64_t kBlockBytes = 8 * 32;
  static constexpr int64_t kPrefetchAhead = 6;
  static constexpr int64_t kGatherRows = 64;
};

struct IsaAvx512 {
  static constexpr CpuIsa kIsa = CpuIsa::kAvx512;
  static constexpr int64_t kVectorBytes = 64;
  static constexpr int64_t kBlockBytes = 8 * 64;
  static constexpr int64_t kPrefetchAhead = 6;
  static constexpr int64_t kGatherRows = 128;
};

}  // namespace ttgnn
