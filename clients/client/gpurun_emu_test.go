//go:build cudaemu && !cuda

package client

// The GPU runs (gpurun_test.go) on the host emulation of the kernels.
func init() { gpuRunEmulated = true }
