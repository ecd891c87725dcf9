//go:build cuda

package trainer

// #cgo LDFLAGS: ${SRCDIR}/cuda/build/libtrainer_cuda.a -lcudart_static -ldl -lrt -lpthread -lstdc++
import "C"

// emulatedGPU is false: New trains on the GPU when there is one.
const emulatedGPU = false
