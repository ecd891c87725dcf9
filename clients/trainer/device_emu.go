//go:build cudaemu && !cuda

package trainer

// The cudaemu build tag (tests only) links cuda/model.cu compiled for the
// host (device_emu.cc, cuda/emu) in place of libtrainer_cuda.a, so that the
// GPU path's residency is tested without a GPU: go test -tags cudaemu -run
// GPUResidency ./clients/trainer/. Stale host copies are filled with NaN
// (TR_POISON_STALE), so that a missing download shows.

// #cgo CXXFLAGS: -std=c++17 -O2 -I${SRCDIR}/cuda
// #cgo CFLAGS: -DTR_POISON_STALE -DTR_EMULATED_DEVICE
// #include <stddef.h>
// size_t tr_emu_device_bytes(void);
// size_t tr_emu_pinned_bytes(void);
// void tr_emu_set_devices(int n);
// void tr_emu_set_memory(size_t bytes);
import "C"

// setEmulatedDevices sets how many devices the emulation has (1 unless a
// test asks for more, for data parallelism).
func setEmulatedDevices(n int) { C.tr_emu_set_devices(C.int(n)) }

// SetEmulatedGPUMemory sets each emulated device's memory in bytes (80 GiB
// unless a test asks for less): tests of what does not fit.
func SetEmulatedGPUMemory(bytes int64) { C.tr_emu_set_memory(C.size_t(bytes)) }

// emulatedGPU is true: the emulation runs each kernel thread by thread, so
// a trainer uses it only after SetGPU(true) and the other tests stay fast.
const emulatedGPU = true

// emulatedMemory returns the emulated device's live bytes and the
// page-locked host bytes (cuda/emu/emu.h counts them), for the footprint test.
func emulatedMemory() (device, pinned int64) {
	return int64(C.tr_emu_device_bytes()), int64(C.tr_emu_pinned_bytes())
}
