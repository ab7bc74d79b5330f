# System libraries tessera builds on. Each missing one stops configuration with the Debian
# package that provides it, so a new machine knows what to install.
# A macro, not a function, so the <VAR>_* results land in the caller's scope.
macro(ts_require_pkg var module debpkg)
    pkg_check_modules(${var} QUIET ${module})
    if(NOT ${var}_FOUND)
        message(FATAL_ERROR "tessera needs ${module}: apt-get install ${debpkg}")
    endif()
endmacro()

ts_require_pkg(PCRE2 libpcre2-8 libpcre2-dev)
set(TS_PCRE2_LIBS ${PCRE2_LINK_LIBRARIES} CACHE INTERNAL "")
include_directories(${PCRE2_INCLUDE_DIRS})

ts_require_pkg(CJSON libcjson libcjson-dev)
ts_require_pkg(MHD libmicrohttpd libmicrohttpd-dev)
set(TS_HTTP_LIBS ${MHD_LINK_LIBRARIES} ${CJSON_LINK_LIBRARIES} CACHE INTERNAL "")
include_directories(${CJSON_INCLUDE_DIRS} ${MHD_INCLUDE_DIRS})

# SHA-256 for the KV cache's prefix-block hash chain (Debian: libssl-dev).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

if(TS_BUILD_TESTS)
    ts_require_pkg(CMOCKA cmocka libcmocka-dev)
endif()

if(TS_MPI)
    find_package(MPI REQUIRED COMPONENTS C)
endif()
if(TS_CUDA)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
endif()
