# ts_layer(NAME DIR DEPS...): one static library per source layer.
set(TS_ALL_LAYERS "" CACHE INTERNAL "")

function(ts_simd_flags srcs)
    foreach(src ${srcs})
        if(src MATCHES "(_avx512\\.c|/avx512/[^/]*\\.c)$")
            set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
                "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mavx2;-mfma;-mf16c")
        elseif(src MATCHES "/avxvnni/[^/]*\\.c$")
            set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
                "-mavx2;-mfma;-mf16c;-mbmi2;-mavxvnni")
        elseif(src MATCHES "(_avx2\\.c|/avx2/[^/]*\\.c)$")
            set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
                "-mavx2;-mfma;-mf16c;-mbmi2")
        endif()
    endforeach()
endfunction()

function(ts_layer name dir)
    # A layer's kernels for one instruction set may sit in a folder named after it
    # (src/quant/avx512/q32.c); files there get that set's flags like *_avx512.c files.
    file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${dir}/*.c
         ${CMAKE_SOURCE_DIR}/src/${dir}/avx2/*.c ${CMAKE_SOURCE_DIR}/src/${dir}/avxvnni/*.c
         ${CMAKE_SOURCE_DIR}/src/${dir}/avx512/*.c)
    if(NOT srcs)
        return()
    endif()
    ts_simd_flags("${srcs}")
    add_library(ts_${name} STATIC ${srcs})
    # src/ is private to the layers: a user of the libraries (the tools) sees only include/.
    target_include_directories(ts_${name} PUBLIC ${CMAKE_SOURCE_DIR}/include
                                          PRIVATE ${CMAKE_SOURCE_DIR}/src)
    set(deps "")
    foreach(d ${ARGN})
        if(TARGET ${d} OR NOT d MATCHES "^ts_")
            list(APPEND deps ${d})
        endif()
    endforeach()
    target_link_libraries(ts_${name} PUBLIC ${deps})
    set(TS_ALL_LAYERS ${TS_ALL_LAYERS} ts_${name} CACHE INTERNAL "")
endfunction()
