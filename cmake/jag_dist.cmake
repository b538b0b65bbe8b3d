# Distributed training over MPI (src/dist; its API in include/jag.h). Included by
# the root CMakeLists.txt after the jag targets exist.
#
# With MPI (find_package(MPI COMPONENTS C); Debian: libopenmpi-dev and
# openmpi-bin, which scripts/setup.sh installs) src/dist's collectives and
# DDP are compiled into libjag, which then links libmpi. Without it the same
# functions exist and fail with JAG_ENOTIMPL (src/dist/unavailable.c), so
# programs and the Python package build either way.
option(JAG_USE_MPI "Build the distributed API (jag_dist_*) over MPI when found" ON)
set(JAG_HAVE_MPI OFF)
set(JAG_MPI_LINK "") # for jag.pc's Libs.private
if(JAG_USE_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(JAG_HAVE_MPI ON)
  endif()
endif()

if(JAG_HAVE_MPI)
  file(GLOB JAG_DIST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../src/dist/*.c)
  list(FILTER JAG_DIST_SOURCES EXCLUDE REGEX "unavailable\\.c$")
  target_sources(jag_objects PRIVATE ${JAG_DIST_SOURCES})
  # MPI's headers are system headers (imported target): -Werror stays on
  # for jag's own code.
  target_link_libraries(jag_objects PUBLIC MPI::MPI_C)
  foreach(t jag jag_static)
    target_link_libraries(${t} PUBLIC MPI::MPI_C)
  endforeach()
  string(JOIN " " JAG_MPI_LINK ${MPI_C_LIBRARIES})
  message(STATUS "MPI: ${MPI_C_LIBRARIES} (MPI ${MPI_C_VERSION}): distributed training (jag_dist_*) built")
else()
  target_sources(jag_objects PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src/dist/unavailable.c)
  message(STATUS "MPI not found or JAG_USE_MPI=OFF (install libopenmpi-dev openmpi-bin): jag_dist_* fail with JAG_ENOTIMPL, no MPI tests")
endif()
