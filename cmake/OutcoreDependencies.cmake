# Third-party libraries, all from Debian packages (scripts/install-deps).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 QUIET)
find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp)
  if(CLI11_INCLUDE_DIR)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
    set(CLI11_FOUND TRUE)
  endif()
endif()

# BLAS for the CPU backend's GEMM tiles (OpenBLAS through the CBLAS interface).
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(OUTCORE_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread REQUIRED)

# TIFF images through libtiff (>= 4.5 for per-handle error handlers), optional: without
# it outcore builds src/io/tiff/tiff_unavailable.cpp and io::tiff_supported() is false.
find_package(TIFF 4.5 QUIET)
option(OUTCORE_WITH_TIFF "Read and write TIFF images through libtiff" ${TIFF_FOUND})
if(OUTCORE_WITH_TIFF AND NOT TIFF_FOUND)
  message(FATAL_ERROR "OUTCORE_WITH_TIFF=ON but libtiff >= 4.5 was not found (Debian: libtiff-dev)")
endif()
