# page_sync.cmake — fails when src/server/page.c is not what embed_page.cmake makes of page.html.
get_filename_component(dir "${COMMITTED}" DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -DIN=${IN} -DOUT=${OUT} -P ${dir}/embed_page.cmake
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "embed_page.cmake failed (${rc})")
endif()
file(READ "${OUT}" fresh)
file(READ "${COMMITTED}" committed)
if(NOT fresh STREQUAL committed)
    message(FATAL_ERROR "src/server/page.c is stale: regenerate it with\n  cmake -DIN=src/server/page.html -DOUT=src/server/page.c -P src/server/embed_page.cmake")
endif()
message(STATUS "page.c matches page.html")
