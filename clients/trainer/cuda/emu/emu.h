// emu.h: host stand-ins for the part of the CUDA runtime that model.cu uses,
// so that model.cu compiles as plain C++ and each launch runs its kernel
// thread by thread on the CPU. A thread of model.cu writes only outputs of
// its own and reads only what its launch does not write, or what its block
// wrote before a __syncthreads (see its header), so every thread computes
// exactly what it computes on a GPU, whatever order the threads run in.
#ifndef TRG_EMU_H
#define TRG_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>

#define __global__ static // internal: a binary may also link the real library
#define __device__
#define __host__
#define __shared__ static // blocks run one after another, so one copy serves them all
#define __restrict__
#define __launch_bounds__(...)
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))

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

// A launch whose kernel calls __syncthreads runs each thread of a block as a
// fiber: a thread runs until its next barrier, and the block moves past the
// barrier once every thread has reached it.
struct trg_fiber {
    ucontext_t ctx;
    dim3 tid;
    int done;
};
enum { TRG_FIBER_STACK = 64 << 10, TRG_MAX_THREADS = 1024 };
static trg_fiber trg_fibers[TRG_MAX_THREADS];
static char *trg_stacks;
static ucontext_t trg_scheduler;
static int trg_current;
static const std::function<void()> *trg_body;

static void trg_fiber_main(void) {
    (*trg_body)();
    trg_fibers[trg_current].done = 1; // then uc_link returns to the scheduler
}

static void __syncthreads(void) { swapcontext(&trg_fibers[trg_current].ctx, &trg_scheduler); }

static void trg_run_block(const std::function<void()> &body) {
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    if (n > TRG_MAX_THREADS) abort();
    if (!trg_stacks && !(trg_stacks = (char *)malloc((size_t)TRG_MAX_THREADS * TRG_FIBER_STACK))) abort();
    trg_body = &body;
    for (unsigned i = 0; i < n; i++) {
        trg_fiber *f = &trg_fibers[i];
        f->tid = dim3(i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y));
        f->done = 0;
        getcontext(&f->ctx);
        f->ctx.uc_stack.ss_sp = trg_stacks + (size_t)i * TRG_FIBER_STACK;
        f->ctx.uc_stack.ss_size = TRG_FIBER_STACK;
        f->ctx.uc_link = &trg_scheduler;
        makecontext(&f->ctx, trg_fiber_main, 0);
    }
    for (;;) { // one pass: every thread runs to its next barrier or its end
        unsigned finished = 0;
        for (unsigned i = 0; i < n; i++) {
            trg_current = (int)i;
            threadIdx = trg_fibers[i].tid;
            swapcontext(&trg_scheduler, &trg_fibers[i].ctx);
            finished += trg_fibers[i].done;
        }
        if (finished == n) return;
        if (finished) { // a GPU would hang or misbehave here
            fprintf(stderr, "emu: %u of %u threads ended while the others wait at __syncthreads\n", finished, n);
            abort();
        }
    }
}

#define TRG_LAUNCH_SYNC(kernel, grid, block, ...)                                         \
    do {                                                                                  \
        gridDim = dim3(grid);                                                             \
        blockDim = dim3(block);                                                           \
        const std::function<void()> body_ = [&]() { kernel(__VA_ARGS__); };              \
        for (blockIdx.z = 0; blockIdx.z < gridDim.z; blockIdx.z++)                        \
            for (blockIdx.y = 0; blockIdx.y < gridDim.y; blockIdx.y++)                    \
                for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++) trg_run_block(body_); \
    } while (0)

// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 of the calling thread's
// warp: D (16x8) = A (16x32) B (32x8) + C. Each lane gives its fragments in
// the PTX ISA's layout ("Matrix Fragments for mma.m16n8k32", .s8), where
// lane = 4 g + t and byte i of a (a[i / 4] >> (8 * (i % 4))) is A's element
//   row g for i in [0, 4) and [8, 12), g + 8 otherwise;
//   column 4 t + i % 4, plus 16 for i >= 8;
// byte i of b is B's element at row (k) 4 t + i % 4, plus 16 for i >= 4, and
// column g; c[i] and d[i] are at row g (i < 2) or g + 8, column 2 t + i % 2.
// The lanes put their pieces into the warp's whole matrices, meet at a
// barrier, each computes its D from the whole matrices, and a second barrier
// lets the matrices be reused. So the kernel must launch with
// TRG_LAUNCH_SYNC, and every thread of the block must call it the same
// number of times between its own barriers (as the hardware requires of a
// warp).
static void trg_emu_mma_s8_16832(int d[4], const unsigned a[4], const unsigned b[2], const int c[4]) {
    static signed char A[TRG_MAX_THREADS / 32][16][32], B[TRG_MAX_THREADS / 32][32][8];
    static int C[TRG_MAX_THREADS / 32][16][8];
    unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned w = tid / 32, lane = tid % 32, g = lane >> 2, t = lane % 4;
    for (unsigned i = 0; i < 16; i++) {
        unsigned row = i < 4 || (i >= 8 && i < 12) ? g : g + 8, col = t * 4 + (i & 3) + (i >= 8 ? 16 : 0);
        A[w][row][col] = (signed char)(a[i / 4] >> (8 * (i % 4)));
    }
    for (unsigned i = 0; i < 8; i++) B[w][t * 4 + (i & 3) + (i >= 4 ? 16 : 0)][g] = (signed char)(b[i / 4] >> (8 * (i % 4)));
    for (unsigned i = 0; i < 4; i++) C[w][i < 2 ? g : g + 8][t * 2 + (i & 1)] = c[i];
    __syncthreads();
    for (unsigned i = 0; i < 4; i++) {
        unsigned row = i < 2 ? g : g + 8, col = t * 2 + (i & 1);
        unsigned acc = (unsigned)C[w][row][col]; // s32 wraps
        for (int k = 0; k < 32; k++) acc += (unsigned)(A[w][row][k] * B[w][k][col]);
        d[i] = (int)acc;
    }
    __syncthreads();
}

// A float4 load or store (ld4, st4 in model.cu): the GPU faults unless p is
// 16-byte aligned.
static void trg_emu_vector_access(const void *p) {
    if ((uintptr_t)p % 16) {
        fprintf(stderr, "emu: float4 access at %p, not 16-byte aligned\n", p);
        abort();
    }
}

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidDevice = 101 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct cudaDeviceProp {
    char name[256];
};

// Live bytes of emulated device memory (trg_emu_bytes[0]: cudaMalloc less
// cudaFree) and of page-locked host memory ([1]: cudaMallocHost), which the
// footprint test compares with tr_footprint. Each block carries its size
// and kind in a 16-byte header, so blocks stay 16-byte aligned for ld4 and
// st4; freeing a block as the other kind aborts, as it fails on a GPU.
static size_t trg_emu_bytes[2];
static cudaError_t trg_emu_alloc(void **p, size_t n, int kind) {
    unsigned char *b = (unsigned char *)malloc(n + 16);
    *p = NULL;
    if (!b) return cudaErrorMemoryAllocation;
    memcpy(b, &n, sizeof n);
    b[8] = (unsigned char)kind;
    __atomic_fetch_add(&trg_emu_bytes[kind], n, __ATOMIC_RELAXED);
    *p = b + 16;
    return cudaSuccess;
}
static cudaError_t trg_emu_free(void *p, int kind) {
    if (!p) return cudaSuccess;
    unsigned char *b = (unsigned char *)p - 16;
    size_t n;
    memcpy(&n, b, sizeof n);
    if (b[8] != kind) {
        fprintf(stderr, "emu: %s of a block from %s\n", kind ? "cudaFreeHost" : "cudaFree", kind ? "cudaMalloc" : "cudaMallocHost");
        abort();
    }
    __atomic_fetch_sub(&trg_emu_bytes[kind], n, __ATOMIC_RELAXED);
    free(b);
    return cudaSuccess;
}
static cudaError_t cudaMalloc(void **p, size_t n) { return trg_emu_alloc(p, n, 0); }
static cudaError_t cudaMallocHost(void **p, size_t n) { return trg_emu_alloc(p, n, 1); }
static cudaError_t cudaFree(void *p) { return trg_emu_free(p, 0); }
static cudaError_t cudaFreeHost(void *p) { return trg_emu_free(p, 1); }
enum { cudaHostRegisterDefault = 0 };
static cudaError_t cudaHostRegister(void *, size_t, unsigned) { return cudaSuccess; }
static cudaError_t cudaHostUnregister(void *) { return cudaSuccess; }
static cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) { memcpy(dst, src, n); return cudaSuccess; }
static cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
static cudaError_t cudaMemsetAsync(void *p, int v, size_t n) { return cudaMemset(p, v, n); }
static cudaError_t cudaGetLastError(void) { return cudaSuccess; }
// trg_emu_devices emulated devices (tests set it; data parallelism), all
// in host memory: a copy between two is a memcpy.
static int trg_emu_devices = 1;
static cudaError_t cudaGetDeviceCount(int *n) { *n = trg_emu_devices; return cudaSuccess; }
static cudaError_t cudaSetDevice(int d) { return d >= 0 && d < trg_emu_devices ? cudaSuccess : cudaErrorInvalidDevice; }
static cudaError_t cudaMemcpyPeer(void *dst, int, const void *src, int, size_t n) { memcpy(dst, src, n); return cudaSuccess; }
// Launches run to completion when they are made, so there is nothing to wait for.
static cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
// The pitched (2D) peer copies of tensor parallelism: rows of
// extent.width bytes, extent.height of them, one depth.
struct cudaPitchedPtr {
    void *ptr;
    size_t pitch, xsize, ysize;
};
struct cudaExtent {
    size_t width, height, depth;
};
struct cudaPos {
    size_t x, y, z;
};
struct cudaArray;
struct cudaMemcpy3DPeerParms {
    cudaArray *srcArray;
    cudaPos srcPos;
    cudaPitchedPtr srcPtr;
    int srcDevice;
    cudaArray *dstArray;
    cudaPos dstPos;
    cudaPitchedPtr dstPtr;
    int dstDevice;
    cudaExtent extent;
};
static cudaPitchedPtr make_cudaPitchedPtr(void *p, size_t pitch, size_t xsize, size_t ysize) { return {p, pitch, xsize, ysize}; }
static cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) { return {w, h, d}; }
static cudaError_t cudaMemcpy3DPeer(const cudaMemcpy3DPeerParms *p) {
    if (p->extent.depth != 1 || p->extent.width > p->srcPtr.pitch || p->extent.width > p->dstPtr.pitch) abort();
    for (size_t y = 0; y < p->extent.height; y++)
        memcpy((char *)p->dstPtr.ptr + y * p->dstPtr.pitch, (const char *)p->srcPtr.ptr + y * p->srcPtr.pitch, p->extent.width);
    return cudaSuccess;
}
// Each emulated device's memory (tests set it), for cudaMemGetInfo.
static size_t trg_emu_memory = (size_t)80 << 30;
static cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) {
    *total = trg_emu_memory;
    *free_b = trg_emu_memory > trg_emu_bytes[0] ? trg_emu_memory - trg_emu_bytes[0] : 0;
    return cudaSuccess;
}
static cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    strcpy(p->name, "host emulation");
    return cudaSuccess;
}
// The emulated mma is sm_80's.
struct cudaFuncAttributes {
    int ptxVersion;
};
template <class F> static cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, F) {
    a->ptxVersion = 80;
    return cudaSuccess;
}
static const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error" : e == cudaErrorInvalidDevice ? "invalid device ordinal" : "out of memory";
}

#endif
