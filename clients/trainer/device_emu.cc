//go:build cudaemu && !cuda

// device_emu.cc: cuda/model.cu for the host (cuda/emu/emu.h) under the
// cudaemu build tag (device_emu.go). model_cu.h links to it: go's build
// cache hashes the files in a package's directory, so an edit of model.cu
// rebuilds this.
#define TRG_EMULATE 1
#include "model_cu.h"

// The emulated device's live bytes (cudaMalloc less cudaFree) and the
// page-locked host bytes (cudaMallocHost), for the footprint test.
extern "C" size_t tr_emu_device_bytes(void) { return trg_emu_bytes[0]; }
extern "C" size_t tr_emu_pinned_bytes(void) { return trg_emu_bytes[1]; }
// How many devices cudaGetDeviceCount reports (data parallelism tests).
extern "C" void tr_emu_set_devices(int n) { trg_emu_devices = n; }
// Each emulated device's memory (cudaMemGetInfo).
extern "C" void tr_emu_set_memory(size_t bytes) { trg_emu_memory = bytes; }
