# Finds OpenBLAS, preferring Debian's OpenMP build (libopenblas-openmp-dev):
# jag's own kernels use OpenMP, and an OpenMP OpenBLAS shares that thread
# pool instead of starting a second one that fights it for the cores.
# Sets JAG_OPENBLAS_INCLUDE_DIR (the folder of cblas.h) and JAG_OPENBLAS_LIBRARY.
set(_jag_multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
find_path(JAG_OPENBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/${_jag_multiarch}/openblas-openmp /usr/include/openblas
  NO_DEFAULT_PATH)
find_path(JAG_OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
find_library(JAG_OPENBLAS_LIBRARY NAMES openblas
  PATHS /usr/lib/${_jag_multiarch}/openblas-openmp NO_DEFAULT_PATH)
find_library(JAG_OPENBLAS_LIBRARY NAMES openblas)
if(NOT JAG_OPENBLAS_INCLUDE_DIR OR NOT JAG_OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS not found: install libopenblas-openmp-dev (scripts/setup.sh does)")
endif()
message(STATUS "OpenBLAS: ${JAG_OPENBLAS_LIBRARY} (cblas.h in ${JAG_OPENBLAS_INCLUDE_DIR})")
