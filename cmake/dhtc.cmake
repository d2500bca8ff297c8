# Project-wide helpers: warnings for our own targets, and sanitizer flags for test targets.

function(dhtc_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 reports false positives inside std::variant/std::map moves at -O2
    # (maybe-uninitialized); the sanitizer builds and valgrind cover the real thing.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
    # Asio's coroutine frames allocate with a sized operator new that GCC 12 pairs with the
    # wrong delete in its analysis whenever it inlines the frame allocation (sanitizers do,
    # and so does -O2 once a coroutine grows); and it warns that atomic_thread_fence is not
    # modelled under TSan. Neither is a defect of ours.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-mismatched-new-delete>)
    if(DHTC_SANITIZE MATCHES "thread")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-tsan>)
    endif()
  endif()
  if(DHTC_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Sanitizers apply to the test targets and to the libraries they link, so the flags are
# added globally when DHTC_SANITIZE is set; such a build is only used to run the tests.
if(DHTC_SANITIZE)
  add_compile_options(-fsanitize=${DHTC_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${DHTC_SANITIZE})
endif()

# Fuzz builds instrument every library for coverage and memory errors; the fuzz targets
# then link libFuzzer's main (tests/fuzz/CMakeLists.txt).
if(DHTC_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()
