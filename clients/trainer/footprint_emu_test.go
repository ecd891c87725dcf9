//go:build cudaemu && !cuda

package trainer

import (
	"fmt"
	"os"
	"runtime"
	"testing"
)

// Slack for the host on the GPU path: the CPU path's (footprintHostSlack),
// plus the GPU model's struct (2.6 KiB) and each emulated device block's
// 16-byte size header with its malloc chunk overhead (at most 40 bytes, for
// about 30 blocks); the device blocks themselves are subtracted exactly.
const footprintGPUHostSlack = footprintHostSlack + 4<<10

// On the GPU path (cuda/model.cu on the emulated device), the device
// memory a trainer holds after training is what Footprint says, byte for
// byte: the emulated cudaMalloc counts every live block. The host memory
// (the C model's buffers, the page-locked ones and the host copies of the
// optimizer state) matches it to the allocator's overhead. Named to run
// with scripts/test.sh's cudaemu tests (-run 'GPU(Residency|...)').
func TestGPUResidencyFootprint(t *testing.T) {
	for _, cfg := range footprintConfigs() {
		for _, c := range footprintCases() {
			t.Run(cfg.Name+"/"+c.name, func(t *testing.T) {
				runtime.LockOSThread() // one OpenMP pool (measureHost)
				defer runtime.UnlockOSThread()
				dev0, pinned0 := emulatedMemory()
				heap, tr := measureHost(t, cfg, c, true)
				dev1, pinned1 := emulatedMemory()
				defer tr.Close()
				opt := c.opt
				opt.GPU, opt.Threads = true, max(defaultThreads(), footprintThreads)
				fp, err := Footprint(cfg, opt)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := dev1-dev0, fp.OnDevice.Steady(); got != want {
					t.Errorf("device: %d bytes live, Footprint says %d (%+d)\n%+v", got, want, got-want, fp.OnDevice)
				}
				// The emulated device's blocks come from malloc too.
				got, want := heap-(dev1-dev0), fp.OnHost.Steady()
				if got < want || got > want+footprintGPUHostSlack {
					t.Errorf("host: malloc holds %d bytes, Footprint says %d (%+d; slack %d)\n%+v",
						got, want, got-want, footprintGPUHostSlack, fp.OnHost)
				}
				t.Logf("device %d bytes; host %d, Footprint %d (%+d); page-locked %d", dev1-dev0, got, want, got-want, pinned1-pinned0)
			})
		}
	}
}

// The same for a call's peak on the GPU path: the host buffers that cross
// to and from the device during a call (TestFootprintPeakMatches' malloc
// counter, in a child process).
func TestGPUResidencyFootprintPeak(t *testing.T) {
	if os.Getenv(footprintChildEnv) == "" {
		runFootprintChild(t, "TestGPUResidencyFootprintPeak")
		return
	}
	if _, peak := heapStats(); peak <= 0 {
		t.Fatal("the malloc counter is not preloaded (no peak from mallinfo2)")
	}
	for _, cfg := range footprintConfigs() {
		for _, c := range footprintCases() {
			t.Run(fmt.Sprintf("%s/%s", cfg.Name, c.name), func(t *testing.T) { checkPeaks(t, cfg, c, true) })
		}
	}
}

// A trainer that computes on the CPU holds no device memory: New only notes
// that a GPU is there, and the device opens when the GPU is asked for
// (SetGPU(true), SetDevices, or on a real GPU the first call that computes).
func TestGPUResidencyOpensOnlyWhenAsked(t *testing.T) {
	cfg := tinyLlama
	before, _ := emulatedMemory()
	tr := newTrainer(t, cfg, 5)
	if err := tr.SetGPU(false); err != nil {
		t.Fatal(err)
	}
	step(t, tr, textFor(cfg, 5, 2*8+1), 0, 2, 8)
	if got, _ := emulatedMemory(); got != before || tr.Backend() != "cpu" {
		t.Fatalf("a CPU trainer: %d device bytes held (had %d), backend %s", got-before, before, tr.Backend())
	}
	if err := tr.SetGPU(true); err != nil {
		t.Fatal(err)
	}
	if got, _ := emulatedMemory(); got <= before {
		t.Fatalf("SetGPU(true) opened no device memory (%d bytes, had %d)", got, before)
	}
}
