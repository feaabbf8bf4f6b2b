// Which instruction-set path the CPU kernels run.
//
// Portable x86-64 builds compile the kernels' hot loops once per x86-64 level, each with block
// sizes and distances of its own (see tt_lookup_cpu_tuning.h):
//   avx512    x86-64-v4 (AVX-512 F/BW/CD/DQ/VL), 32 vector registers of 64 bytes;
//   avx2      x86-64-v3 (AVX2, FMA, BMI2), 16 vector registers of 32 bytes;
//   baseline  the build's own flags (x86-64: SSE2), 16 vector registers of 16 bytes.
// Other builds (TTGNN_NATIVE=1, other architectures, other compilers) have one path, "native" or
// "baseline". The path is the best one the CPU runs, unless TTGNN_CPU_ISA names one (read at the
// first lookup) or set_cpu_isa picks one (the tests and the benchmark, to cover every path).
#pragma once

#include <string>
#include <vector>

namespace ttgnn {

enum class CpuIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2, kNative = 3 };

// "baseline", "avx2", "avx512" or "native".
const char* cpu_isa_name(CpuIsa isa);

// The paths this build has that this CPU (and OS) can run, best first.
std::vector<CpuIsa> cpu_isas_supported();

// The path the kernels run now. The first call settles it: TTGNN_CPU_ISA when set (an unknown
// name throws; a path the CPU cannot run warns and falls back to the best one), else the best.
CpuIsa cpu_isa_active();

// As cpu_isa_active, but a warning of the first call (TTGNN_CPU_ISA names a path this CPU
// cannot run) is put in `*warning` instead of being raised through TORCH_WARN.
CpuIsa cpu_isa_active(std::string* warning);

// Makes the kernels run the path named `name` ("auto" for the best one) from the next call on.
// Throws std::invalid_argument for an unknown name and std::runtime_error for a path this build
// or this CPU lacks. Returns the path now active.
CpuIsa cpu_isa_set(const std::string& name);

}  // namespace ttgnn
