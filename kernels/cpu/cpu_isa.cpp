// Choice of the CPU kernels' instruction-set path (see cpu_isa.h).
#include "cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <c10/util/Exception.h>

#include "tt_lookup_cpu_tuning.h"

namespace ttgnn {
namespace {

// -1 until the first call settles it.
std::atomic<int> active_isa{-1};
std::mutex settle_mutex;

bool cpu_runs(CpuIsa isa) {
#if TT_CPU_MULTI_ISA
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::kAvx512: return __builtin_cpu_supports("x86-64-v4");
    case CpuIsa::kAvx2: return __builtin_cpu_supports("x86-64-v3");
    case CpuIsa::kBaseline: return true;
    case CpuIsa::kNative: return false;
  }
  return false;
#else
  return isa == kSinglePath;
#endif
}

// The path `name` names, or throws std::invalid_argument.
CpuIsa parse(const std::string& name) {
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kBaseline, CpuIsa::kNative}) {
    if (name == cpu_isa_name(isa)) return isa;
  }
  throw std::invalid_argument("unknown CPU path '" + name +
                              "'; valid: auto, avx512, avx2, baseline, native");
}

std::string supported_names() {
  std::string names;
  for (CpuIsa isa : cpu_isas_supported()) {
    if (!names.empty()) names += ", ";
    names += cpu_isa_name(isa);
  }
  return names;
}

// Why `isa` cannot run here, or "" when it can.
std::string why_not(CpuIsa isa) {
  if (cpu_runs(isa)) return "";
#if TT_CPU_MULTI_ISA
  if (isa == CpuIsa::kNative) {
    return "this build has no 'native' path (it is built with TTGNN_NATIVE=1 only)";
  }
  return std::string("this CPU cannot run the '") + cpu_isa_name(isa) +
         "' path (it runs: " + supported_names() + ")";
#else
  return std::string("this build has the '") + cpu_isa_name(kSinglePath) +
         "' path only (the per-ISA paths need a portable x86-64 build with GCC 12 or newer)";
#endif
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kNative: return "native";
  }
  return "unknown";
}

std::vector<CpuIsa> cpu_isas_supported() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : {CpuIsa::kNative, CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kBaseline}) {
    if (cpu_runs(isa)) isas.push_back(isa);
  }
  return isas;
}

CpuIsa cpu_isa_active() {
  std::string warning;
  const CpuIsa isa = cpu_isa_active(&warning);
  if (!warning.empty()) TORCH_WARN(warning);
  return isa;
}

CpuIsa cpu_isa_active(std::string* warning) {
  const int isa = active_isa.load(std::memory_order_relaxed);
  if (isa >= 0) return static_cast<CpuIsa>(isa);
  std::lock_guard<std::mutex> lock(settle_mutex);
  if (active_isa.load() >= 0) return static_cast<CpuIsa>(active_isa.load());
  CpuIsa chosen = cpu_isas_supported().front();
  const char* env = std::getenv("TTGNN_CPU_ISA");
  const std::string requested = env == nullptr ? "" : env;
  if (!requested.empty() && requested != "auto") {
    CpuIsa wanted;
    try {
      wanted = parse(requested);
    } catch (const std::invalid_argument& error) {
      // Not settled: every lookup raises until the variable is fixed.
      TORCH_CHECK(false, "TTGNN_CPU_ISA: ", error.what());
    }
    const std::string reason = why_not(wanted);
    if (reason.empty()) {
      chosen = wanted;
    } else {
      *warning = "TTGNN_CPU_ISA=" + requested + ": " + reason + "; the kernels run the '" +
                 cpu_isa_name(chosen) + "' path instead";
    }
  }
  active_isa.store(static_cast<int>(chosen));
  return chosen;
}

CpuIsa cpu_isa_set(const std::string& name) {
  const CpuIsa isa = name == "auto" ? cpu_isas_supported().front() : parse(name);
  const std::string reason = why_not(isa);
  if (!reason.empty()) throw std::runtime_error("set_cpu_isa('" + name + "'): " + reason);
  std::lock_guard<std::mutex> lock(settle_mutex);
  active_isa.store(static_cast<int>(isa));
  return isa;
}

}  // namespace ttgnn
