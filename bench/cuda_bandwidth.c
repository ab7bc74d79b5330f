/*
 * cuda_bandwidth.c — device memory bandwidth of a CUDA GPU, the physical limit next to which
 * `tessera bench --backend cuda` puts its decode speed: a device-to-device copy of a 1 GiB
 * buffer (each byte read once and written once, so GB/s = 2 x bytes / time), and host-to-device
 * copies from pinned memory (the weight upload path). Built only with -DTS_CUDA=ON.
 *
 *     cuda_bandwidth [DEVICE]
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

static int check(cudaError_t ce, const char *what) {
    if (ce != cudaSuccess) {
        fprintf(stderr, "cuda_bandwidth: %s: %s\n", what, cudaGetErrorString(ce));
        return 1;
    }
    return 0;
}

/* Milliseconds of `reps` copies of n bytes, timed with events on the default stream. */
static float time_copies(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, int reps) {
    cudaEvent_t a, b;
    float ms = -1.0f;
    if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) {
        return ms;
    }
    cudaMemcpy(dst, src, n, kind); /* warm-up */
    cudaEventRecord(a, 0);
    for (int i = 0; i < reps; i++) {
        cudaMemcpyAsync(dst, src, n, kind, 0);
    }
    cudaEventRecord(b, 0);
    if (cudaEventSynchronize(b) == cudaSuccess) {
        cudaEventElapsedTime(&ms, a, b);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

int main(int argc, char **argv) {
    int dev = argc > 1 ? atoi(argv[1]) : 0;
    size_t n = (size_t)1 << 30;
    void *x = NULL, *y = NULL, *h = NULL;
    struct cudaDeviceProp prop;
    if (check(cudaSetDevice(dev), "select device") ||
        check(cudaGetDeviceProperties(&prop, dev), "device properties") ||
        check(cudaMalloc(&x, n), "allocate") || check(cudaMalloc(&y, n), "allocate") ||
        check(cudaMallocHost(&h, n), "allocate pinned")) {
        return 1;
    }
    float d2d = time_copies(y, x, n, cudaMemcpyDeviceToDevice, 10);
    float h2d = time_copies(x, h, n, cudaMemcpyHostToDevice, 3);
    printf("device %d: %s, %.1f GiB\n", dev, prop.name, (double)prop.totalGlobalMem / (1 << 30));
    printf("device copy bandwidth (read + write): %.0f GB/s\n",
           d2d > 0 ? 2.0 * 10 * (double)n / (d2d * 1e6) : 0.0);
    printf("host-to-device (pinned): %.1f GB/s\n", h2d > 0 ? 3 * (double)n / (h2d * 1e6) : 0.0);
    cudaFree(x);
    cudaFree(y);
    cudaFreeHost(h);
    return 0;
}
