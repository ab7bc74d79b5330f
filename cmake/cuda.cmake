# The CUDA backend (src/backends/cuda/). Its .c files — the planning helpers and the vtable —
# are always part of ts_cuda; without TS_CUDA the vtable compiles to the "built without CUDA"
# error. With TS_CUDA the kernels (*.cu, compiled by nvcc for CMAKE_CUDA_ARCHITECTURES,
# default 90 = H100/H200) join the library, TS_HAVE_CUDA turns the vtable on, and the library
# links the CUDA runtime and cuBLAS.
if(TS_CUDA)
    file(GLOB ts_cuda_kernels CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backends/cuda/*.cu)
    target_sources(ts_cuda PRIVATE ${ts_cuda_kernels})
    target_compile_definitions(ts_cuda PRIVATE TS_HAVE_CUDA)
    target_include_directories(ts_cuda SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    # No C++ exceptions: the kernels are C-like, and no unprefixed personality symbol leaks out.
    set(ts_cuda_flags -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Wno-unused-function
                      -Xcompiler=-fno-exceptions)
    if(TS_WERROR)
        list(APPEND ts_cuda_flags -Werror=all-warnings -Xcompiler=-Werror)
    endif()
    target_compile_options(ts_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${ts_cuda_flags}>)
    target_link_libraries(ts_cuda PUBLIC CUDA::cudart CUDA::cublas stdc++)
endif()
