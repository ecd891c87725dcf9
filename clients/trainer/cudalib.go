//go:build cuda

package trainer

// #cgo LDFLAGS: ${SRCDIR}/cuda/build/libtrainer_cuda.a -lcudart_static -ldl -lrt -lpthread -lstdc++
import "C"

// emulatedGPU is false: New trains on the GPU when there is one.
const emulatedGPU = false

// setEmulatedDevices does nothing: real devices are what they are (the
// data parallelism tests name GPU 0 several times instead).
func setEmulatedDevices(int) {}
