"""The developer build of the extension jag._C, in place, against a libjag
build tree (`make test-python` runs it):

    make build                                      # builds build/libjag.so
    cd python && ../.venv/bin/python setup.py build_ext --inplace

jag._C links build/libjag.so (JAG_BUILD_DIR overrides the build tree) and
records that directory as an rpath, so nothing needs installing; headers come
from ../include (JAG_INCLUDE_DIR overrides). To install the package, run
`pip install .` at the repository root instead (pyproject.toml: CMake builds
libjag and links it into the extension).
"""
import glob
import os

from setuptools import Extension, find_packages, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
build_dir = os.path.abspath(os.environ.get("JAG_BUILD_DIR", os.path.join(root, "build")))
include_dir = os.path.abspath(os.environ.get("JAG_INCLUDE_DIR", os.path.join(root, "include")))

# Every jag/_*.c is part of the extension (python/CMakeLists.txt builds the same list).
sources = sorted(os.path.relpath(p, here) for p in glob.glob(os.path.join(here, "jag", "_*.c")))
headers = sorted(os.path.relpath(p, here) for p in glob.glob(os.path.join(here, "jag", "_*.h")))

ext = Extension(
    "jag._C",
    sources=sources,
    depends=headers,
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
    packages=find_packages(include=["jag", "jag.*"]),
    package_data={"jag": ["py.typed"]},
    ext_modules=[ext],
    install_requires=["numpy"],
    python_requires=">=3.8",
)
