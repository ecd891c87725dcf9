// emu.h: host stand-ins for the part of the CUDA runtime that model.cu uses,
// so that model.cu compiles as plain C++ and each launch runs its kernel
// thread by thread on the CPU. model.cu's kernels are independent per thread
// (see its header), so the order in which the threads run does not matter,
// and every thread computes exactly what it computes on a GPU.
#ifndef TRG_EMU_H
#define TRG_EMU_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define __global__ static // internal: a binary may also link the real library
#define __device__
#define __host__

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The launch being emulated: one thread at a time.
static dim3 blockIdx, threadIdx, blockDim, gridDim;

#define TRG_LAUNCH(kernel, grid, block, ...)                                                  \
    do {                                                                                      \
        gridDim = dim3(grid);                                                                 \
        blockDim = dim3(block);                                                               \
        for (blockIdx.z = 0; blockIdx.z < gridDim.z; blockIdx.z++)                            \
            for (blockIdx.y = 0; blockIdx.y < gridDim.y; blockIdx.y++)                        \
                for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)                    \
                    for (threadIdx.z = 0; threadIdx.z < blockDim.z; threadIdx.z++)            \
                        for (threadIdx.y = 0; threadIdx.y < blockDim.y; threadIdx.y++)        \
                            for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++)    \
                                kernel(__VA_ARGS__);                                          \
    } while (0)

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost };
struct cudaDeviceProp {
    char name[256];
};

static cudaError_t cudaMalloc(void **p, size_t n) { return (*p = malloc(n)) ? cudaSuccess : cudaErrorMemoryAllocation; }
static cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
static cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
static cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
static cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) { memcpy(dst, src, n); return cudaSuccess; }
static cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
static cudaError_t cudaMemsetAsync(void *p, int v, size_t n) { return cudaMemset(p, v, n); }
static cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
static cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    strcpy(p->name, "host emulation");
    return cudaSuccess;
}
static const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "out of memory"; }

#endif
