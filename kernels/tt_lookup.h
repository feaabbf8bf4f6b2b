// Declarations shared by the op schemas (tt_lookup.cpp), the CPU kernels and the CUDA kernels.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "tt_lookup_math.h"

namespace ttgnn {

// Validates the cores and rows of a lookup (count, rank, dtype, device, chained ranks; not the
// row values, which each device checks while it reads them) and returns the table's shape.
// `op` names the op in error messages.
TTDims check_lookup_inputs(const std::vector<at::Tensor>& cores, const at::Tensor& rows,
                           const char* op);

// Validates the output gradient of a lookup against the table shape and the rows.
void check_grad_output(const at::Tensor& grad_out, const at::Tensor& rows, const TTDims& dims,
                       const at::Tensor& first_core, const char* op);

// Raises if a row of `rows` (int64, any device; one reduction, then two scalars to the host) is
// outside [0, dims.num_rows). Used by the CUDA kernels; the CPU kernels check each row as they
// read it.
void check_rows_in_range(const at::Tensor& rows, const TTDims& dims, const char* op);

// Contiguous copies (no copy when already contiguous) of the cores.
std::vector<at::Tensor> contiguous_cores(const std::vector<at::Tensor>& cores);

}  // namespace ttgnn
