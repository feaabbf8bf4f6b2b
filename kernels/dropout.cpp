// Schema of the dropout op and its input checks.
//
// ttgnn::dropout(x, p, seed) zeroes each element of x with probability p and scales the others by
// 1 / (1 - p), like torch's dropout, but draws its keep-or-drop decisions from a counter-based
// generator: element i of the (contiguous) tensor is decided by a hash of (seed, i) alone. So the
// same call with the same seed gives the same mask on any thread count, and the backward, which
// multiplies the incoming gradient by the same mask and scale, is the same op with the same seed:
// no mask is stored. The CPU kernel registers in kernels/cpu/dropout_cpu.cpp; the Python side
// (ttgnn/dropout.py) draws the seed from torch's generator and adds the fake kernel and the
// autograd formula.
#include "dropout.h"

#include <cmath>

#include <torch/library.h>

namespace ttgnn {

void check_dropout(const at::Tensor& x, double p) {
  TORCH_CHECK(x.defined(), "ttgnn::dropout: x is undefined");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "ttgnn::dropout: x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(std::isfinite(p) && p >= 0.0 && p < 1.0, "ttgnn::dropout: p must lie in [0, 1), got ", p);
}

}  // namespace ttgnn

TORCH_LIBRARY_FRAGMENT(ttgnn, m) {
  // x (any shape): a tensor of x's shape, contiguous, each element x[i] * (1 / (1 - p)) or 0
  // (x[i] * 0), decided by (seed, i), i the element's position in row-major order.
  m.def("dropout(Tensor x, float p, int seed) -> Tensor");
}
