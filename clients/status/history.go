package status

// ring keeps the last cap values pushed.
type ring[T any] struct {
	buf   []T
	start int
	n     int
}

func newRing[T any](capacity int) ring[T] { return ring[T]{buf: make([]T, capacity)} }

func (r *ring[T]) push(v T) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

// slice copies the values out, oldest first.
func (r *ring[T]) slice() []T {
	out := make([]T, r.n)
	for i := range out {
		out[i] = r.buf[(r.start+i)%len(r.buf)]
	}
	return out
}

func (r *ring[T]) last() (T, bool) {
	if r.n == 0 {
		var zero T
		return zero, false
	}
	return r.buf[(r.start+r.n-1)%len(r.buf)], true
}

// thinned keeps a whole-run history in at most cap points: it keeps every
// stride-th point offered and, when full, drops every other kept point and
// doubles the stride. A loss curve over 100k steps thus stays evenly sampled
// from its first step, unlike a ring that would forget the start.
type thinned struct {
	capacity int
	stride   uint64
	offered  uint64
	pts      []LossPoint
	// latest is always reported, kept or not, so the curve ends at the
	// newest value.
	latest     LossPoint
	hasLatest  bool
	latestKept bool
}

func newThinned(capacity int) thinned {
	return thinned{capacity: max(capacity, 2), stride: 1}
}

func (t *thinned) add(p LossPoint) {
	idx := t.offered
	t.offered++
	t.latest, t.hasLatest = p, true
	keep := idx%t.stride == 0
	if keep && len(t.pts) == t.capacity {
		n := 0
		for i := 0; i < len(t.pts); i += 2 {
			t.pts[n] = t.pts[i]
			n++
		}
		t.pts = t.pts[:n]
		t.stride *= 2
		keep = idx%t.stride == 0
	}
	if keep {
		t.pts = append(t.pts, p)
	}
	t.latestKept = keep
}

func (t *thinned) points() []LossPoint {
	out := make([]LossPoint, len(t.pts), len(t.pts)+1)
	copy(out, t.pts)
	if t.hasLatest && !t.latestKept {
		out = append(out, t.latest)
	}
	return out
}
