# libtessera.so (TS_SHARED): the layers linked whole into one shared library that exports the
# public API and nothing else. The exported names are read from include/tessera.h (every
# function it declares) into a linker version script, so a function added to the header is
# exported without a list to keep in sync, and nothing of src/ leaks out. The Python package
# (python/) is built on it; its tests check the exports against the header.
file(READ ${CMAKE_SOURCE_DIR}/include/tessera.h ts_header)
# Comments out (they name functions too), then every "TYPE name(" that starts a declaration.
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" ts_header "${ts_header}")
string(REGEX MATCHALL "[A-Za-z0-9_]+[ \t\n*]+ts_[a-z0-9_]+\\(" ts_decls "${ts_header}")
set(ts_exports "")
foreach(d ${ts_decls})
    if(NOT d MATCHES "^typedef")
        string(REGEX MATCH "ts_[a-z0-9_]+\\($" name "${d}")
        string(REGEX REPLACE "\\($" "" name "${name}")
        list(APPEND ts_exports ${name})
    endif()
endforeach()
list(REMOVE_DUPLICATES ts_exports)
list(LENGTH ts_exports ts_n_exports)
if(ts_n_exports LESS 50)
    message(FATAL_ERROR "cmake/shared.cmake: only ${ts_n_exports} functions found in "
                        "include/tessera.h; the declaration pattern no longer matches it")
endif()
list(JOIN ts_exports ";\n        " ts_exports_text)
file(WRITE ${CMAKE_BINARY_DIR}/generated/tessera.map
     "{\n    global:\n        ${ts_exports_text};\n    local:\n        *;\n};\n")
file(WRITE ${CMAKE_BINARY_DIR}/generated/tessera_shared.c
     "/* libtessera.so: the layers' code, linked whole (cmake/shared.cmake). */\n"
     "#include \"tessera.h\"\n")

# TS_PY_PREBUILT: a libtessera.so built already (by a TS_SHARED build of the same checkout) goes
# into the wheel instead of compiling the library again, as the tests do (tests/python).
set(TS_PY_PREBUILT "" CACHE FILEPATH "libtessera.so to package instead of building it")
if(TS_PY_PREBUILT)
    if(NOT EXISTS ${TS_PY_PREBUILT})
        message(FATAL_ERROR "TS_PY_PREBUILT: no file at ${TS_PY_PREBUILT}")
    endif()
    add_custom_target(tessera_shared)
    if(SKBUILD)
        install(FILES ${TS_PY_PREBUILT} DESTINATION tessera RENAME libtessera.so COMPONENT python)
        install(FILES ${CMAKE_SOURCE_DIR}/include/tessera.h DESTINATION tessera COMPONENT python)
    endif()
    return()
endif()

add_library(tessera_shared SHARED ${CMAKE_BINARY_DIR}/generated/tessera_shared.c)
set_target_properties(tessera_shared PROPERTIES OUTPUT_NAME tessera
                      LINK_DEPENDS ${CMAKE_BINARY_DIR}/generated/tessera.map)
target_include_directories(tessera_shared PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_link_options(tessera_shared PRIVATE
                    "-Wl,--version-script=${CMAKE_BINARY_DIR}/generated/tessera.map")
if(NOT TS_SANITIZE)
    # Every symbol resolved at link time (the sanitizers' runtime comes from the executable).
    target_link_options(tessera_shared PRIVATE "-Wl,--no-undefined")
endif()
target_link_libraries(tessera_shared PRIVATE "-Wl,--whole-archive" ${TS_ALL_LAYERS}
                      "-Wl,--no-whole-archive" ${CJSON_LINK_LIBRARIES} m)

# The Python wheel (scikit-build-core sets SKBUILD): the library and the header its bindings
# read go into the package's folder.
if(SKBUILD)
    install(TARGETS tessera_shared LIBRARY DESTINATION tessera COMPONENT python)
    install(FILES ${CMAKE_SOURCE_DIR}/include/tessera.h DESTINATION tessera COMPONENT python)
endif()
