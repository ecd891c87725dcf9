package trainer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Numeric contract v3 (mx8), written again in Go from README.md's
// definition: the reference the C kernels of every ISA level must equal.

const mxBlock = 32

// mxExp is the exponent of a block of largest |x| bits amax; ok false for
// a block holding a NaN or an infinity.
func mxExp(amax uint32) (e int, ok bool) {
	if amax >= 0x7f800000 {
		return 0, false
	}
	e = min(max(int(amax>>23)-127-6, -63), 63)
	if e < 63 && math.Float32frombits(amax)*pow2(-e) > 127 {
		e++
	}
	return e, true
}

func pow2(e int) float32 { return math.Float32frombits(uint32(e+127) << 23) }

func mxCode(x float32, e int) int32 {
	return int32(math.RoundToEven(float64(min(max(x*pow2(-e), -127), 127))))
}

// mxQuant quantizes one block (at most 32 values): codes and scale of its
// first slice, and of its second (the residual's codes at e - 8).
func mxQuant(x []float32) (q, q2 [mxBlock]int32, scale, scale2 float32) {
	var amax uint32
	for _, v := range x {
		amax = max(amax, math.Float32bits(v)&0x7fffffff)
	}
	e, ok := mxExp(amax)
	if !ok {
		nan := float32(math.NaN())
		return q, q2, nan, nan
	}
	for i, v := range x {
		q[i] = mxCode(v, e)
		q2[i] = mxCode(v-float32(float32(q[i])*pow2(e)), e-8)
	}
	return q, q2, pow2(e), pow2(e - 8)
}

// mxGEMM is out(M,N) = A(M,K) B(N,K)^T in contract v3, blocks of the whole
// K; slices puts A, B or both in two slices: each block's parts are (a1,
// b1), then (a1, b2) when B has two, then (a2, b1) when A has.
func mxGEMM(slices MXSlices, m, n, k int, a, b []float32) []float32 {
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var acc float32
			for k0 := 0; k0 < k; k0 += mxBlock {
				k1 := min(k0+mxBlock, k)
				qa, qa2, sa, sa2 := mxQuant(a[i*k+k0 : i*k+k1])
				qb, qb2, sb, sb2 := mxQuant(b[j*k+k0 : j*k+k1])
				step := func(qa, qb *[mxBlock]int32, sa, sb float32) {
					var dot int32
					for t := range mxBlock {
						dot += qa[t] * qb[t]
					}
					acc = fma32(float32(dot), sa*sb, acc)
				}
				step(&qa, &qb, sa, sb)
				if slices&MXSliceB != 0 {
					step(&qa, &qb2, sa, sb2)
				}
				if slices&MXSliceA != 0 {
					step(&qa2, &qb, sa2, sb)
				}
			}
			out[i*n+j] = acc
		}
	}
	return out
}

// mxOperand draws values whose blocks span many magnitudes: some blocks
// zero, some below 2^-57 (the smallest scale's range), some above 127*2^63
// (saturating codes), ties at half-integers, and ordinary noise.
func mxOperand(r *rand.Rand, rows, k int) []float32 {
	x := make([]float32, rows*k)
	for i := 0; i < len(x); i += mxBlock {
		end := min(i+mxBlock, len(x))
		kind := r.IntN(8)
		for j := i; j < end; j++ {
			v := r.Float32()*2 - 1
			switch kind {
			case 0:
				v = 0
			case 1:
				v *= 1e-20
			case 2:
				v *= 1e30
			case 3:
				v = float32(r.IntN(255)-127) / 2 // ties once scaled
			case 4:
				v *= float32(math.Ldexp(1, r.IntN(40)-20))
			}
			x[j] = v
		}
	}
	return x
}

// Every mx8 kernel (each ISA level the CPU has, and the AMX kernel with
// emulated tiles on any CPU; 1 to 3 threads) gives the bits of the Go
// reference, at shapes that cut every tile, panel and k step short; whole
// training steps on the CPU give the same digests at every level, thread
// count and micro-batch, with sequences that split blocks (T = 40).
func TestMXBitsAcrossISAs(t *testing.T) {
	cfg := lightConfig(t)
	cfg.Arith = ArithMX8
	tr := newTrainer(t, cfg, 1)
	r := rand.New(rand.NewPCG(34, 1))
	var levels []ISA
	for _, level := range append(slices.Clone(ISALevels), isaAMXEmulated) {
		if got, _ := tr.SetISA(level); got != level {
			t.Logf("%v: not on this CPU", level)
			continue
		}
		levels = append(levels, level)
	}
	if len(levels) < 2 {
		t.Fatal("no ISA level of the CPU runs")
	}
	t.Logf("levels checked: %v", levels)
	for _, s := range [][3]int{{1, 1, 1}, {5, 9, 31}, {7, 13, 33}, {37, 53, 301}, {13, 70, 64}, {200, 1600, 545}} {
		m, n, k := s[0], s[1], s[2]
		a, b := mxOperand(r, m, k), mxOperand(r, n, k)
		for _, slices := range []MXSlices{0, MXSliceA, MXSliceB, MXSliceA | MXSliceB} {
			want := mxGEMM(slices, m, n, k, a, b)
			out := make([]float32, m*n)
			for _, level := range levels {
				if _, err := tr.SetISA(level); err != nil {
					t.Fatal(err)
				}
				for _, threads := range []int{1, 2, 3} {
					if err := tr.SetThreads(threads); err != nil {
						t.Fatal(err)
					}
					clear(out)
					if err := tr.GEMM(ArithMX8, slices, m, n, k, a, b, out); err != nil {
						t.Fatal(err)
					}
					for i := range out {
						if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v threads=%d slices=%d (%d,%d,%d) out[%d][%d] = %v, the contract gives %v",
								level, threads, slices, m, n, k, i/n, i%n, out[i], want[i])
						}
					}
				}
			}
		}
	}

	// Two slices are about 2^7 times closer to the exact product than one
	// (and to each other, one slice per side about as close).
	{
		const m, n, k = 16, 16, 256
		a, b := make([]float32, m*k), make([]float32, n*k)
		for i := range a {
			a[i] = float32(r.NormFloat64())
		}
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		errOf := func(slices MXSlices) float64 {
			out := make([]float32, m*n)
			if err := tr.GEMM(ArithMX8, slices, m, n, k, a, b, out); err != nil {
				t.Fatal(err)
			}
			var e, norm float64
			for i := range m {
				for j := range n {
					var exact float64
					for t := range k {
						exact += float64(a[i*k+t]) * float64(b[j*k+t])
					}
					e += (float64(out[i*n+j]) - exact) * (float64(out[i*n+j]) - exact)
					norm += exact * exact
				}
			}
			return math.Sqrt(e / norm)
		}
		one, ea, eb, both := errOf(0), errOf(MXSliceA), errOf(MXSliceB), errOf(MXSliceA|MXSliceB)
		t.Logf("relative error: one slice %.2e, A in two %.2e, B in two %.2e, both %.2e", one, ea, eb, both)
		if !(both < one/40 && ea < one/1.2 && eb < one/1.2 && both < ea && both < eb) {
			t.Errorf("two slices do not gain precision: one %.2e, A %.2e, B %.2e, both %.2e", one, ea, eb, both)
		}
	}
	if err := tr.GEMM(ArithFP32, MXSliceA, 2, 2, 2, make([]float32, 4), make([]float32, 4), make([]float32, 4)); err == nil {
		t.Error("fp32 GEMM with slices: no error")
	}

	// A NaN or an infinity in a block makes every output it reaches NaN.
	a, b := make([]float32, 3*64), make([]float32, 2*64)
	for i := range a {
		a[i] = r.Float32() - 0.5
	}
	for i := range b {
		b[i] = r.Float32() - 0.5
	}
	a[64+40] = float32(math.Inf(1))
	out := make([]float32, 6)
	if err := tr.GEMM(ArithMX8, 0, 3, 2, 64, a, b, out); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(out[2])) || !math.IsNaN(float64(out[3])) || math.IsNaN(float64(out[0])) {
		t.Errorf("an infinity in row 1 of A gave %v, want NaN in row 1 only", out)
	}

	// Training: digests after two AdamW steps.
	const n, seqLen = 4, 40
	text := textFor(cfg, 3, 3*n*seqLen+1)
	train := func(level ISA, threads, micro int) [32]byte {
		c := cfg
		c.MicroBatch = micro
		tr := newTrainer(t, c, 7)
		if err := tr.SetGPU(false); err != nil { // the CPU's kernels, also in a cuda build on a GPU machine
			t.Fatal(err)
		}
		if _, err := tr.SetISA(level); err != nil {
			t.Fatal(err)
		}
		if err := tr.SetThreads(threads); err != nil {
			t.Fatal(err)
		}
		d := runSteps(t, tr, "adamw", text, 0, 2, n, seqLen)
		return d[len(d)-1]
	}
	ref := train(ISABase, 1, n)
	for _, level := range levels {
		for _, run := range [][2]int{{1, 1}, {2, 3}, {2, 4}} {
			if d := train(level, run[0], run[1]); d != ref {
				t.Errorf("%v threads=%d micro-batch=%d: digest %x, the baseline level's is %x", level, run[0], run[1], d[:6], ref[:6])
			}
		}
	}
	// The same steps in fp32 end at other weights.
	weights := func(arith string) []float32 {
		c := cfg
		c.Arith = arith
		tr := newTrainer(t, c, 7)
		runSteps(t, tr, "adamw", text, 0, 2, n, seqLen)
		p, err := tr.Params()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mx, fp := weights(ArithMX8), weights(ArithFP32)
	same := 0
	for i := range mx {
		if mx[i] == fp[i] {
			same++
		}
	}
	if same == len(mx) {
		t.Error("fp32 and mx8 training reached the same weights: the contracts are not both in use")
	}
}
