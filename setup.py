"""Ahead-of-time build of the compiled kernels ttgnn._C; all metadata lives in pyproject.toml.

The kernels (kernels/) are optional and torch is not a build requirement: a plain ``pip install .``
or ``pip install git+...`` builds in an isolated environment without torch, so no kernels are
compiled here and ttgnn compiles them on first use against the torch it runs with (see
ttgnn/_ext.py). Where torch is importable at build time (``pip install --no-build-isolation``,
``make setup``), the kernels are compiled now, with the sources and flags of ttgnn/_build.py,
and a build record (ttgnn/_C.build.json: Python, torch, CUDA, C++ ABI, source digest) is written
beside the library; at import ttgnn loads the library only if the record matches the running
torch. If the CUDA kernels cannot be built (incomplete toolkit, or their build fails), the CPU
kernels are built alone, with a message naming what was missing, instead of failing the install.

Environment:
    TTGNN_NO_EXTENSION=1   compile nothing here.
    TTGNN_NATIVE=1         compile the CPU kernels with -march=native (faster, not portable).
    TTGNN_NO_CUDA=1        build the CPU kernels only, even where CUDA is available.
    TORCH_CUDA_ARCH_LIST   CUDA architectures (default "8.0;9.0"); read by torch's BuildExtension.
    CUDA_HOME              the CUDA toolkit (default: the folder above nvcc on PATH).
"""
import importlib.util
import os
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"


def _load_recipe():
    """ttgnn/_build.py, loaded by path (importing the package would need torch)."""
    spec = importlib.util.spec_from_file_location("_ttgnn_build", HERE / "ttgnn" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


recipe = _load_recipe()


def _say(message: str) -> None:
    # Build output (pip shows it with -v, and when the build fails).
    print(f"ttgnn: {message}", file=sys.stderr)


def _relative(path: Path) -> str:
    # setuptools wants source paths relative to setup.py.
    return os.path.relpath(path, HERE)


def _drop_cuda(ext, cpp_extension) -> None:
    """Turns a CUDAExtension into the CPU-only extension of the same sources."""
    ext.sources = [s for s in ext.sources if not s.endswith(".cu")]
    ext.libraries = [lib for lib in ext.libraries if lib not in ("cudart", "c10_cuda", "torch_cuda")]
    cuda_dirs = set(recipe._cuda_library_dirs(cpp_extension))
    ext.library_dirs = [d for d in ext.library_dirs if d not in cuda_dirs]


def build_ext_class(base, cpp_extension, tag, kernels, cuda_skipped):
    """torch's ``BuildExtension`` that falls back to the CPU kernels and writes build records.

    Args:
        base (type): ``torch.utils.cpp_extension.BuildExtension`` (a stand-in in tests).
        cpp_extension (module): ``torch.utils.cpp_extension``.
        tag (dict): ``ttgnn._build.torch_tag()`` of the torch building.
        kernels (Path): the kernel folder (its digest goes into the record).
        cuda_skipped (str, optional): why the CUDA kernels were left out before the build.
    """

    class BuildExtension(base):
        def build_extension(self, ext):
            skipped = cuda_skipped
            if any(s.endswith(".cu") for s in ext.sources):
                try:
                    super().build_extension(ext)
                except Exception as exc:  # a compile or link error in the CUDA part
                    skipped = (f"the CUDA build failed ({type(exc).__name__}: {exc}; the "
                               f"compiler's output is above)")
                    _say(f"{skipped}; building the CPU kernels only")
                    _drop_cuda(ext, cpp_extension)
                    super().build_extension(ext)
            else:
                super().build_extension(ext)
            cuda_kernels = any(s.endswith(".cu") for s in ext.sources)
            self._ttgnn_record = recipe.make_record(
                tag, recipe.source_digest(kernels, cuda=cuda_kernels), cuda_kernels=cuda_kernels,
                cuda_skipped=skipped, flags=ext.extra_compile_args["cxx"], built_by="setup.py")
            recipe.write_record(self._record_path(ext), self._ttgnn_record)

        def copy_extensions_to_source(self):
            # Editable installs and --inplace builds copy the library into the source tree.
            super().copy_extensions_to_source()
            saved, self.inplace = self.inplace, True
            try:
                for ext in self.extensions:
                    recipe.write_record(self._record_path(ext), self._ttgnn_record)
            finally:
                self.inplace = saved

        def _record_path(self, ext) -> Path:
            return Path(self.get_ext_fullpath(ext.name)).with_name(recipe.RECORD_NAME)

    return BuildExtension


def _extensions():
    if recipe.env_flag("TTGNN_NO_EXTENSION"):
        _say("TTGNN_NO_EXTENSION is set; no kernels compiled (the pure-PyTorch reference is used)")
        return [], {}
    try:
        import torch  # noqa: F401
        from torch.utils import cpp_extension
    except ImportError:
        _say("torch is not importable at build time (pip's build isolation); the kernels will be "
             "compiled on first use for the torch ttgnn runs with")
        return [], {}

    override = recipe.cxx_override()  # raises when no compiler here links the shared libstdc++
    if override is not None:
        _say(override[1])
        os.environ["CXX"] = override[0]
    cuda_skipped = recipe.cuda_problem(cpp_extension) if recipe.cuda_wanted() else None
    with_cuda = recipe.cuda_wanted() and cuda_skipped is None
    if cuda_skipped is not None:
        _say(f"building the CPU kernels only: the CUDA kernels cannot be built here: {cuda_skipped}")
    extra_compile_args = {"cxx": recipe.cxx_flags()}
    if with_cuda:
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", recipe.DEFAULT_CUDA_ARCH_LIST)
        extra_compile_args["nvcc"] = list(recipe.NVCC_FLAGS)
        extension_cls = cpp_extension.CUDAExtension
    else:
        extension_cls = cpp_extension.CppExtension
    _say(f"building ttgnn._C with {'CPU and CUDA' if with_cuda else 'CPU'} kernels for torch "
         f"{torch.__version__}")
    ext = extension_cls(
        name="ttgnn._C",
        sources=[_relative(p) for p in recipe.sources(KERNELS, cuda=with_cuda)],
        include_dirs=[str(KERNELS)],
        extra_compile_args=extra_compile_args,
        extra_link_args=list(recipe.LINK_FLAGS),
    )
    build_ext = build_ext_class(cpp_extension.BuildExtension, cpp_extension, recipe.torch_tag(),
                                KERNELS, cuda_skipped)
    return [ext], {"build_ext": build_ext}


if __name__ == "__main__":
    ext_modules, cmdclass = _extensions()
    setup(ext_modules=ext_modules, cmdclass=cmdclass)
