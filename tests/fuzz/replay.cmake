# Corpus replay in every build (included from tests/CMakeLists.txt): each harness
# tests/fuzz/fuzz_NAME.c that has a committed corpus tests/fuzz/corpus/NAME/ is built with
# replay_main.c instead of libFuzzer, linked against the layer libraries, and registered as the
# CTest fuzz/replay_NAME. Plain builds check the harness's invariants on every seed and every
# reproducer; the ASan/UBSan build checks them under the sanitizers.
file(GLOB ts_fuzz_harnesses CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
foreach(harness ${ts_fuzz_harnesses})
    get_filename_component(fname ${harness} NAME_WE)
    string(REGEX REPLACE "^fuzz_" "" corpus_name ${fname})
    set(corpus ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${corpus_name})
    if(NOT IS_DIRECTORY ${corpus})
        continue()
    endif()
    add_executable(replay_${fname} ${harness} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.c)
    target_include_directories(replay_${fname} PRIVATE ${CMAKE_SOURCE_DIR}/include
                                                       ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(replay_${fname} PRIVATE ${TS_ALL_LAYERS} ${TS_ALL_LAYERS}
                          ${CJSON_LINK_LIBRARIES} ${TS_PCRE2_LIBS} Threads::Threads m)
    add_test(NAME fuzz/replay_${corpus_name} COMMAND replay_${fname} ${corpus})
    set_tests_properties(fuzz/replay_${corpus_name} PROPERTIES TIMEOUT ${TS_TEST_TIMEOUT})
endforeach()
