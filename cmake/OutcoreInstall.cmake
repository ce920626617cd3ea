# Installation: headers, libraries, the CLI, a CMake package and a pkg-config file.
#
#   cmake --install build/release --prefix /opt/outcore
#   find_package(outcore CONFIG REQUIRED)  ->  target_link_libraries(app PRIVATE outcore::core)
#   pkg-config --cflags --libs outcore
#
# The libraries are static by default, so the package re-finds what they link
# (fmt, Threads, OpenBLAS); a new third-party dependency of a library target must be
# added to outcoreConfig.cmake.in and to outcore.pc.in as well.
include(CMakePackageConfigHelpers)

set(OUTCORE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/outcore CACHE STRING
    "Where outcoreConfig.cmake is installed, relative to the prefix")
mark_as_advanced(OUTCORE_INSTALL_CMAKEDIR)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/outcore
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT outcore_development
        FILES_MATCHING PATTERN "*.hpp")

set(_outcore_install_targets outcore_base outcore_core)
if(TARGET outcore_swap)
  list(APPEND _outcore_install_targets outcore_swap)
endif()
foreach(b IN LISTS OUTCORE_BACKENDS)
  list(APPEND _outcore_install_targets outcore_${b})
endforeach()
if(TARGET outcore_cli)
  list(APPEND _outcore_install_targets outcore_cli)
endif()

# outcore_warnings reaches the libraries only as $<BUILD_INTERFACE:...>, so it is not
# part of the export set and consumers never inherit outcore's warning flags.
install(TARGETS ${_outcore_install_targets}
        EXPORT outcoreTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT outcore_runtime
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT outcore_runtime
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT outcore_development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT outcoreTargets
        NAMESPACE outcore::
        FILE outcoreTargets.cmake
        DESTINATION ${OUTCORE_INSTALL_CMAKEDIR}
        COMPONENT outcore_development)

set(OUTCORE_CONFIG_WITH_CUDA OFF)
set(OUTCORE_CONFIG_WITH_VULKAN OFF)
if("cuda" IN_LIST OUTCORE_BACKENDS)
  set(OUTCORE_CONFIG_WITH_CUDA ON)
endif()
if("vulkan" IN_LIST OUTCORE_BACKENDS)
  set(OUTCORE_CONFIG_WITH_VULKAN ON)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/outcoreConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/outcoreConfig.cmake
                              INSTALL_DESTINATION ${OUTCORE_INSTALL_CMAKEDIR})
# 0.x releases may break the interface between minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/outcoreConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/outcoreConfig.cmake ${PROJECT_BINARY_DIR}/outcoreConfigVersion.cmake
        DESTINATION ${OUTCORE_INSTALL_CMAKEDIR}
        COMPONENT outcore_development)

# pkg-config: paths relative to the .pc file, so `cmake --install --prefix X` works
# wherever X is. Static libraries are listed dependents-first.
file(RELATIVE_PATH _outcore_pc_to_prefix "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" _outcore_pc_to_prefix "${_outcore_pc_to_prefix}")
set(OUTCORE_PC_PREFIX "\${pcfiledir}/${_outcore_pc_to_prefix}")
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(OUTCORE_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(OUTCORE_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
set(OUTCORE_PC_LIBS "-loutcore")
foreach(b IN LISTS OUTCORE_BACKENDS)
  string(APPEND OUTCORE_PC_LIBS " -loutcore_${b}")
endforeach()
if(TARGET outcore_swap)
  string(APPEND OUTCORE_PC_LIBS " -loutcore_swap")
endif()
string(APPEND OUTCORE_PC_LIBS " -loutcore_base")
set(OUTCORE_PC_DEP_LIBS "")
foreach(_lib IN LISTS BLAS_LIBRARIES BLAS_LINKER_FLAGS)
  string(APPEND OUTCORE_PC_DEP_LIBS " ${_lib}")
endforeach()
if(OUTCORE_WITH_TIFF)
  foreach(_lib IN LISTS TIFF_LIBRARIES)
    string(APPEND OUTCORE_PC_DEP_LIBS " ${_lib}")
  endforeach()
endif()
if(OUTCORE_WITH_PROMETHEUS)
  string(APPEND OUTCORE_PC_DEP_LIBS " -lprometheus-cpp-core")
endif()
# The CUDA backend links the CUDA runtime (cuBLAS is loaded at run time with dlopen).
if("cuda" IN_LIST OUTCORE_BACKENDS)
  string(APPEND OUTCORE_PC_DEP_LIBS " -L${OUTCORE_CUDA_LIBRARY_DIR} -lcudart")
  foreach(_lib IN LISTS CMAKE_DL_LIBS)
    string(APPEND OUTCORE_PC_DEP_LIBS " -l${_lib}")
  endforeach()
endif()
# The Vulkan backend links the Vulkan loader.
if("vulkan" IN_LIST OUTCORE_BACKENDS)
  string(APPEND OUTCORE_PC_DEP_LIBS " -lvulkan")
endif()
string(APPEND OUTCORE_PC_DEP_LIBS " ${CMAKE_THREAD_LIBS_INIT}")
string(STRIP "${OUTCORE_PC_DEP_LIBS}" OUTCORE_PC_DEP_LIBS)
configure_file(${CMAKE_CURRENT_LIST_DIR}/outcore.pc.in ${PROJECT_BINARY_DIR}/outcore.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/outcore.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT outcore_development)
