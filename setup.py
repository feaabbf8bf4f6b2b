"""Build of the optional compiled extension ttgnn._C; all metadata lives in pyproject.toml.

The extension holds the fused TT-lookup kernels (kernels/). It is built by
``pip install --no-build-isolation -e .`` (torch must already be installed) and is optional:
without it ttgnn falls back to the pure-PyTorch reference lookup.

Environment:
    TTGNN_NO_EXTENSION=1   skip the extension (pure-Python install).
    TTGNN_NATIVE=1         compile the CPU kernels with -march=native (faster, not portable).
    TTGNN_NO_CUDA=1        build the CPU kernels only, even where CUDA is available.
    TORCH_CUDA_ARCH_LIST   CUDA architectures (default "8.0;9.0"); read by torch's BuildExtension.
"""
import glob
import os
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _sources(pattern: str) -> list[str]:
    # setuptools wants paths relative to setup.py.
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern)))


def _extensions():
    if _flag("TTGNN_NO_EXTENSION"):
        print("ttgnn: TTGNN_NO_EXTENSION is set; skipping the compiled kernels", file=sys.stderr)
        return [], {}
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        print("ttgnn: torch is not importable at build time (use pip install "
              "--no-build-isolation); skipping the compiled kernels", file=sys.stderr)
        return [], {}

    # -ffp-contract=fast lets the compiler fuse multiply-adds (ISO C++ modes default to off).
    cxx_flags = ["-O3", "-fopenmp", "-fno-math-errno", "-ffp-contract=fast"]
    if _flag("TTGNN_NATIVE"):
        cxx_flags += ["-march=native", "-DTTGNN_NATIVE_BUILD"]
    sources = _sources("kernels/*.cpp") + _sources("kernels/cpu/*.cpp")
    cuda_sources = _sources("kernels/cuda/*.cu")
    with_cuda = (
        bool(cuda_sources)
        and not _flag("TTGNN_NO_CUDA")
        and torch.version.cuda is not None
        and cpp_extension.CUDA_HOME is not None
        and os.path.exists(os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc"))
    )
    extra_compile_args = {"cxx": cxx_flags}
    if with_cuda:
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
        sources += cuda_sources
        extra_compile_args["nvcc"] = ["-O3"]
        extension_cls = cpp_extension.CUDAExtension
    else:
        extension_cls = cpp_extension.CppExtension
    print(f"ttgnn: building ttgnn._C with {'CPU and CUDA' if with_cuda else 'CPU'} kernels",
          file=sys.stderr)
    ext = extension_cls(
        name="ttgnn._C",
        sources=sources,
        include_dirs=[os.path.join(HERE, "kernels")],
        extra_compile_args=extra_compile_args,
        extra_link_args=["-fopenmp"],
    )
    return [ext], {"build_ext": cpp_extension.BuildExtension}


ext_modules, cmdclass = _extensions()
setup(ext_modules=ext_modules, cmdclass=cmdclass)
