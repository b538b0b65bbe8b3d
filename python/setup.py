"""Build the `jag` Python package against libjag.

The extension jag._C links libjag from a CMake build tree (default: ../build,
override with the JAG_BUILD_DIR environment variable) and records that
directory as an rpath, so nothing needs installing:

    make build                                  # builds build/libjag.so
    .venv/bin/python setup.py build_ext --inplace   # (run in python/; `make test-python` does this)
    pip install ./python                        # or as a package

Headers come from ../include (JAG_INCLUDE_DIR overrides).
"""
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
build_dir = os.path.abspath(os.environ.get("JAG_BUILD_DIR", os.path.join(root, "build")))
include_dir = os.path.abspath(os.environ.get("JAG_INCLUDE_DIR", os.path.join(root, "include")))

ext = Extension(
    "jag._C",
    sources=[os.path.join("jag", f) for f in ("_C.c", "_interop.c", "_library.c", "_function.c", "_factory.c", "_nn.c",
                                              "_trace.c", "_io.c", "_optim.c")],
    depends=[os.path.join("jag", f) for f in ("_jagpy.h", "_dlpack.h")],
    include_dirs=[include_dir],
    library_dirs=[build_dir],
    runtime_library_dirs=[build_dir],
    libraries=["jag"],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"],
)

setup(
    name="jag",
    version="0.1.0",
    description="Python bindings of jag, a library of dense and nested tensors",
    packages=["jag", "jag.nn", "jag.optim"],
    ext_modules=[ext],
    install_requires=["numpy"],
    python_requires=">=3.8",
)
