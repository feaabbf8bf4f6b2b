// Schemas of the ttgnn ops and the input checks every backend shares.
//
// The CPU kernels register in kernels/cpu/, the CUDA kernels in kernels/cuda/; the dispatcher
// picks by the device of the inputs. The Python side (ttgnn/ops.py) adds fake (meta) kernels
// and the autograd formula.
#include <Python.h>

#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/ops/aminmax.h>
#include <torch/library.h>

#include "cpu/contraction.h"
#include "cpu/cpu_isa.h"
#include "tt_lookup.h"

// `import ttgnn._C` loads this library, which registers the ops (torch.ops.ttgnn.*). The module
// itself has the functions that choose the CPU kernels' instruction-set path (cpu/cpu_isa.h)
// and their contraction order (cpu/contraction.h).
namespace {

PyObject* py_cpu_isa(PyObject*, PyObject*) {
  try {
    std::string warning;
    const ttgnn::CpuIsa isa = ttgnn::cpu_isa_active(&warning);
    if (!warning.empty() && PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) {
      return nullptr;
    }
    return PyUnicode_FromString(ttgnn::cpu_isa_name(isa));
  } catch (const c10::Error& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what_without_backtrace());
    return nullptr;
  }
}

PyObject* py_cpu_isas(PyObject*, PyObject*) {
  const auto isas = ttgnn::cpu_isas_supported();
  PyObject* names = PyTuple_New(static_cast<Py_ssize_t>(isas.size()));
  if (names == nullptr) return nullptr;
  for (size_t i = 0; i < isas.size(); ++i) {
    PyObject* name = PyUnicode_FromString(ttgnn::cpu_isa_name(isas[i]));
    if (name == nullptr) {
      Py_DECREF(names);
      return nullptr;
    }
    PyTuple_SET_ITEM(names, static_cast<Py_ssize_t>(i), name);
  }
  return names;
}

// A setter taking a name from Python: `set(name)` returns the name now active; an unknown name
// (std::invalid_argument) raises ValueError, any other failure RuntimeError.
template <class Set>
PyObject* set_by_name(PyObject* arg, const char* function, Set set) {
  if (!PyUnicode_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "%s expects a str, got %s", function, Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  const char* name = PyUnicode_AsUTF8(arg);
  if (name == nullptr) return nullptr;
  try {
    return PyUnicode_FromString(set(name));
  } catch (const std::invalid_argument& error) {
    PyErr_SetString(PyExc_ValueError, error.what());
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
  }
  return nullptr;
}

PyObject* py_set_cpu_isa(PyObject*, PyObject* arg) {
  return set_by_name(arg, "set_cpu_isa",
                     [](const char* name) { return ttgnn::cpu_isa_name(ttgnn::cpu_isa_set(name)); });
}

PyObject* py_cpu_contraction(PyObject*, PyObject*) {
  return PyUnicode_FromString(ttgnn::contraction_name(ttgnn::contraction_active()));
}

PyObject* py_set_cpu_contraction(PyObject*, PyObject* arg) {
  return set_by_name(arg, "set_cpu_contraction", [](const char* name) {
    return ttgnn::contraction_name(ttgnn::contraction_set(name));
  });
}

PyMethodDef module_methods[] = {
    {"cpu_isa", py_cpu_isa, METH_NOARGS,
     "cpu_isa() -> str: the instruction-set path the CPU kernels run ('avx512', 'avx2', "
     "'baseline' or 'native'). The first call (or lookup) settles it from TTGNN_CPU_ISA, else "
     "the best path this CPU runs."},
    {"cpu_isas", py_cpu_isas, METH_NOARGS,
     "cpu_isas() -> tuple[str, ...]: the paths this build has that this CPU runs, best first."},
    {"set_cpu_isa", py_set_cpu_isa, METH_O,
     "set_cpu_isa(name: str) -> str: run the path `name` ('auto' for the best) from the next "
     "lookup on; ValueError for an unknown name, RuntimeError for a path this CPU or build "
     "lacks."},
    {"cpu_contraction", py_cpu_contraction, METH_NOARGS,
     "cpu_contraction() -> str: the order the CPU kernels contract a row's core slices in: "
     "'auto' (per window of sorted rows, whichever needs fewer multiply-adds), 'left-to-right' "
     "(shares the products of common row prefixes) or 'right-to-left' (fewer multiply-adds per "
     "row, nothing shared)."},
    {"set_cpu_contraction", py_set_cpu_contraction, METH_O,
     "set_cpu_contraction(name: str) -> str: use the order `name` from the next lookup on "
     "(for tests and benchmarks); ValueError for an unknown name."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C",
      "Compiled TT-lookup kernels; the ops live in torch.ops.ttgnn.",
      -1,
      module_methods,
  };
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  // Settle the CPU path now, so that a TTGNN_CPU_ISA naming a path this CPU lacks is reported as
  // a Python warning at import. (An unknown name is left unsettled: every lookup raises.)
  try {
    std::string warning;
    ttgnn::cpu_isa_active(&warning);
    if (!warning.empty() && PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1) < 0) {
      PyErr_Clear();  // warnings turned into errors: importing must not fail on this
    }
  } catch (const c10::Error&) {
  }
  return module;
}
}

namespace ttgnn {

TTDims check_lookup_inputs(const std::vector<at::Tensor>& cores, const at::Tensor& rows,
                           const char* op) {
  const int64_t num_cores = static_cast<int64_t>(cores.size());
  TORCH_CHECK(num_cores >= 2 && num_cores <= kMaxCores, op, ": expected 2 to ", kMaxCores,
              " cores, got ", num_cores);
  TORCH_CHECK(rows.defined(), op, ": rows is undefined");
  TORCH_CHECK(rows.dim() == 1, op, ": rows must be 1-D (B,), got shape ", rows.sizes());
  TORCH_CHECK(rows.scalar_type() == at::kLong || rows.scalar_type() == at::kInt, op,
              ": rows must be int64 or int32, got ", rows.scalar_type());
  const auto dtype = cores[0].defined() ? cores[0].scalar_type() : at::kFloat;
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble, op,
              ": cores must be float32 or float64, got ", dtype);

  TTDims dims{};
  dims.num_cores = static_cast<int>(num_cores);
  dims.r[0] = 1;
  int64_t num_rows = 1;
  int64_t dim = 1;
  for (int64_t k = 0; k < num_cores; ++k) {
    const at::Tensor& core = cores[k];
    TORCH_CHECK(core.defined(), op, ": core ", k, " is undefined");
    TORCH_CHECK(core.dim() == 4, op, ": core ", k,
                " must be 4-D (n_k, r_{k-1}, m_k, r_k), got shape ", core.sizes());
    TORCH_CHECK(core.scalar_type() == dtype, op, ": core ", k, " has dtype ",
                core.scalar_type(), " but core 0 has ", dtype, "; all cores need one dtype");
    TORCH_CHECK(core.device() == rows.device(), op, ": core ", k, " is on ", core.device(),
                " but rows are on ", rows.device(), "; all inputs must be on one device");
    for (int64_t s = 0; s < 4; ++s) {
      TORCH_CHECK(core.size(s) >= 1, op, ": core ", k, " has an empty dimension, shape ",
                  core.sizes());
    }
    TORCH_CHECK(core.size(1) == dims.r[k], op, ": core ", k, " has shape ", core.sizes(),
                "; its rank dimension 1 must be ", dims.r[k],
                k == 0 ? " (the first core starts with rank 1)"
                       : " (equal to dimension 3 of the previous core)");
    dims.n[k] = core.size(0);
    dims.m[k] = core.size(2);
    dims.r[k + 1] = core.size(3);
    TORCH_CHECK(num_rows <= std::numeric_limits<int64_t>::max() / dims.n[k], op,
                ": the row shape's product overflows int64");
    num_rows *= dims.n[k];
    TORCH_CHECK(dim <= std::numeric_limits<int32_t>::max() / dims.m[k], op,
                ": the column shape's product overflows int32");
    dim *= dims.m[k];
    dims.prefix_cols[k] = dim;
  }
  TORCH_CHECK(dims.r[num_cores] == 1, op, ": the last core has shape ", cores[num_cores - 1].sizes(),
              "; its rank dimension 3 must be 1");
  dims.num_rows = num_rows;
  dims.dim = dim;
  return dims;
}

void check_rows_in_range(const at::Tensor& rows, const TTDims& dims, const char* op) {
  if (rows.numel() == 0) return;
  const auto [lo, hi] = at::aminmax(rows);
  const int64_t low = lo.item<int64_t>();
  const int64_t high = hi.item<int64_t>();
  const int64_t bad = low < 0 ? low : high;
  TORCH_CHECK(low >= 0 && high < dims.num_rows, op, ": row ", bad,
              " is out of range for a TT table with ", dims.num_rows, " rows (valid: 0 to ",
              dims.num_rows - 1, ")");
}

void check_grad_output(const at::Tensor& grad_out, const at::Tensor& rows, const TTDims& dims,
                       const at::Tensor& first_core, const char* op) {
  TORCH_CHECK(grad_out.defined(), op, ": grad_out is undefined");
  TORCH_CHECK(grad_out.dim() == 2 && grad_out.size(0) == rows.size(0) &&
                  grad_out.size(1) == dims.dim,
              op, ": grad_out must have shape (", rows.size(0), ", ", dims.dim, "), got ",
              grad_out.sizes());
  TORCH_CHECK(grad_out.scalar_type() == first_core.scalar_type(), op, ": grad_out has dtype ",
              grad_out.scalar_type(), " but the cores have ", first_core.scalar_type());
  TORCH_CHECK(grad_out.device() == rows.device(), op, ": grad_out is on ", grad_out.device(),
              " but rows are on ", rows.device());
}

std::vector<at::Tensor> contiguous_cores(const std::vector<at::Tensor>& cores) {
  std::vector<at::Tensor> out;
  out.reserve(cores.size());
  for (const auto& core : cores) out.push_back(core.contiguous());
  return out;
}

}  // namespace ttgnn

TORCH_LIBRARY(ttgnn, m) {
  // Rows `rows` (B,) of the TT table with cores `cores[k]` (n_k, r_{k-1}, m_k, r_k): (B, D).
  m.def("tt_lookup(Tensor[] cores, Tensor rows) -> Tensor");
  // Gradients of sum(grad_out * tt_lookup(cores, rows)) with respect to every core.
  m.def("tt_lookup_backward(Tensor grad_out, Tensor[] cores, Tensor rows) -> Tensor[]");
}
