# Run by ctest (tests/install/CMakeLists.txt): install, build a consumer, run it.
# Inputs: BUILD_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX_COMPILER BUILD_TYPE PKG_CONFIG.
cmake_minimum_required(VERSION 3.25)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "install test: ${what}: ok")
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# find_package(outcore CONFIG) with nothing but the prefix to go on.
run_step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer -G ${GENERATOR}
         -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run_step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run_step("run consumer (CMake package)" ${WORK_DIR}/consumer/outcore_consumer)

# pkg-config: the flags alone must compile, link and run the same program.
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "install test: pkg-config not found (scripts/install-deps installs it)")
endif()
file(GLOB_RECURSE pc_files ${prefix}/*/outcore.pc)
list(LENGTH pc_files pc_count)
if(NOT pc_count EQUAL 1)
  message(FATAL_ERROR "install test: expected one outcore.pc under ${prefix}, found: ${pc_files}")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs outcore RESULT_VARIABLE rc
                OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install test: pkg-config --cflags --libs outcore failed: ${pc_err}")
endif()
message(STATUS "install test: pkg-config flags: ${pc_flags}")
separate_arguments(pc_args UNIX_COMMAND "${pc_flags}")
run_step("compile consumer with pkg-config flags"
         ${CXX_COMPILER} -std=c++20 ${CONSUMER_DIR}/main.cpp ${pc_args} -o ${WORK_DIR}/consumer_pc)
run_step("run consumer (pkg-config)" ${WORK_DIR}/consumer_pc)

file(REMOVE_RECURSE ${WORK_DIR})
