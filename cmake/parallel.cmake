# Transports of the parallel layer (src/parallel/): MPI when TS_MPI is on, NCCL when TS_CUDA
# and TS_NCCL (default ON) are on. Each source file compiles its transport only under TS_HAVE_MPI / TS_HAVE_NCCL and
# otherwise reports a clear "built without" error at run time.
if(TS_MPI)
    target_link_libraries(ts_parallel PUBLIC MPI::MPI_C)
    target_compile_definitions(ts_parallel PRIVATE TS_HAVE_MPI)
endif()
if(TS_CUDA AND TS_NCCL)
    find_library(TS_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(TS_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT TS_NCCL_LIB OR NOT TS_NCCL_INCLUDE)
        message(FATAL_ERROR "TS_CUDA needs NCCL (nccl.h and libnccl) for the NCCL transport: "
                            "install NCCL from the CUDA repository (libnccl-dev), point "
                            "TS_NCCL_LIB/TS_NCCL_INCLUDE at it, or configure with -DTS_NCCL=OFF")
    endif()
    target_include_directories(ts_parallel PRIVATE ${TS_NCCL_INCLUDE}
                                                   ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(ts_parallel PUBLIC ${TS_NCCL_LIB} CUDA::cudart)
    target_compile_definitions(ts_parallel PRIVATE TS_HAVE_NCCL)
endif()
