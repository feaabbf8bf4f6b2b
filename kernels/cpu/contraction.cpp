// The CPU kernels' contraction order (see contraction.h).
#include "contraction.h"

#include <atomic>
#include <stdexcept>

namespace ttgnn {
namespace {

std::atomic<int> active_order{static_cast<int>(Contraction::kAuto)};

}  // namespace

const char* contraction_name(Contraction order) {
  switch (order) {
    case Contraction::kAuto: return "auto";
    case Contraction::kLeftToRight: return "left-to-right";
    case Contraction::kRightToLeft: return "right-to-left";
  }
  return "unknown";
}

Contraction contraction_active() {
  return static_cast<Contraction>(active_order.load(std::memory_order_relaxed));
}

Contraction contraction_set(const std::string& name) {
  for (Contraction order :
       {Contraction::kAuto, Contraction::kLeftToRight, Contraction::kRightToLeft}) {
    if (name == contraction_name(order)) {
      active_order.store(static_cast<int>(order));
      return order;
    }
  }
  throw std::invalid_argument("unknown contraction order '" + name +
                              "'; valid: auto, left-to-right, right-to-left");
}

}  // namespace ttgnn
