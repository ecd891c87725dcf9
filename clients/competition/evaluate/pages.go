package evaluate

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Pages draws a round's pages from its seed (programs/competition/README.md, "Off-chain"): the
// dataset's numSequences make num_pages = floor(numSequences /
// sequencesPerPage) whole pages, and page j of the round (j = 0 ..
// pages-1) is the first of u64 LE(sha256(seed ‖ "page" ‖ j u32 LE ‖
// attempt u32 LE)[..8]) % num_pages, attempt = 0, 1, ..., that is not
// already drawn. Page p is the sequences [p·sequencesPerPage,
// (p+1)·sequencesPerPage). The draw depends on its arguments only.
func Pages(seed [32]byte, numSequences uint64, sequencesPerPage uint32, pages int) ([]uint64, error) {
	if sequencesPerPage == 0 {
		return nil, errors.New("pages of 0 sequences: the competition's sequences_per_page must be at least 1")
	}
	if pages < 0 || pages > math.MaxUint32 {
		return nil, fmt.Errorf("%d pages a round: want 0 to %d", pages, uint32(math.MaxUint32))
	}
	numPages := numSequences / uint64(sequencesPerPage)
	if numPages < uint64(pages) {
		return nil, fmt.Errorf("the dataset's %d sequences make %d whole pages of %d sequences, fewer than the %d pages a round evaluates: "+
			"the competition needs a larger dataset, or fewer pages_per_round or sequences_per_page", numSequences, numPages, sequencesPerPage, pages)
	}
	out := make([]uint64, 0, pages)
	drawn := make(map[uint64]bool, pages)
	var msg [32 + 4 + 4 + 4]byte
	copy(msg[:32], seed[:])
	copy(msg[32:36], "page")
	for j := range pages {
		binary.LittleEndian.PutUint32(msg[36:], uint32(j))
		for attempt := uint32(0); ; attempt++ {
			binary.LittleEndian.PutUint32(msg[40:], attempt)
			h := sha256.Sum256(msg[:])
			p := binary.LittleEndian.Uint64(h[:8]) % numPages
			if !drawn[p] {
				drawn[p] = true
				out = append(out, p)
				break
			}
			if attempt == math.MaxUint32 { // 2^32 collisions in a row: not in this universe
				return nil, fmt.Errorf("page %d: no new page in 2^32 attempts", j)
			}
		}
	}
	return out, nil
}
