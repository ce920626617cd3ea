# Warning flags and sanitizers, applied to outcore's own targets through
# outcore_set_warnings(target).
# No -Wnull-dereference: GCC 12 reports it only at -O2 and above (so only the release
# preset, never a Debug build) and then falsely, through inlined std::vector code
# (`std::vector<std::byte> out(n); out[6] = ...`, moves of Blocks during growth).
add_library(outcore_warnings INTERFACE)
target_compile_options(outcore_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
                            -Wcast-align -Woverloaded-virtual>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${OUTCORE_WERROR}>>:-Werror>)

if(OUTCORE_SANITIZE)
  list(JOIN OUTCORE_SANITIZE "," _san)
  add_compile_options(-fsanitize=${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_san})
endif()

function(outcore_set_warnings target)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:outcore_warnings>)
endfunction()
