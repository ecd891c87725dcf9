package trainer

import "math/rand/v2"

// MarkovText returns n bytes drawn from a fixed random Markov chain over 32
// printable symbols in which every symbol has 4 successors with
// probabilities 0.55/0.25/0.15/0.05. Unlike uniform random bytes it can be
// learned (from ln 32 = 3.47 nats down to 1.11 nats, its entropy rate), which
// is what convergence tests and benchmarks of optimizers need when no corpus
// is at hand. The chain is fixed; seed picks the walk.
func MarkovText(seed uint64, n int) []byte {
	const symbols = 32
	alphabet := []byte("abcdefghijklmnopqrstuvwxyz .,;!?")
	chain := rand.New(rand.NewPCG(0x5053594348452d31, 0x4d41524b4f56)) // fixed chain for every caller
	var next [symbols][4]byte
	for i := range next {
		for j := range next[i] {
			next[i][j] = byte(chain.IntN(symbols))
		}
	}
	cum := [4]float64{0.55, 0.80, 0.95, 1.0}
	walk := rand.New(rand.NewPCG(seed, 0x77616c6b))
	out := make([]byte, n)
	a := 0
	for i := range out {
		u := walk.Float64()
		j := 0
		for j < 3 && u >= cum[j] {
			j++
		}
		a = int(next[a][j])
		out[i] = alphabet[a]
	}
	return out
}

// Window returns tokens and next-token targets for n sequences of seqLen
// bytes starting at text[start], sequence i at start + i*seqLen. text must
// hold start + n*seqLen + 1 bytes.
func Window(text []byte, start, n, seqLen int) (tokens, targets []int32) {
	tokens = make([]int32, n*seqLen)
	targets = make([]int32, n*seqLen)
	for i := range tokens {
		tokens[i] = int32(text[start+i])
		targets[i] = int32(text[start+i+1])
	}
	return tokens, targets
}
