// In which order the CPU kernels contract a row's core slices.
//
//   left-to-right  P_k = P_{k-1} G_k[t_k] from the first core on: sorted rows that share their
//                  leading digits share these products (computed once per distinct prefix);
//   right-to-left  S_k = G_k[t_k] S_{k+1} from the last core on, for each row alone: fewer
//                  multiply-adds per row (m_{K-1} is short), but nothing shared;
//   auto           per window of 2,048 sorted distinct rows, whichever needs fewer multiply-adds
//                  given how many distinct prefixes the window has (the default).
// Both orders give the same values to rounding. Forcing one is for tests and benchmarks.
#pragma once

#include <string>

namespace ttgnn {

enum class Contraction : int { kAuto = 0, kLeftToRight = 1, kRightToLeft = 2 };

// "auto", "left-to-right" or "right-to-left".
const char* contraction_name(Contraction order);

// The order the kernels use now (kAuto unless set).
Contraction contraction_active();

// Uses the order named `name` from the next lookup on; throws std::invalid_argument for an
// unknown name. Returns the order now active.
Contraction contraction_set(const std::string& name);

}  // namespace ttgnn
