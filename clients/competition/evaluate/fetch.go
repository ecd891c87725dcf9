package evaluate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/hub"
)

// Fetch makes dir/<revision hex>.safetensors hold the submission's
// checkpoint, from its repo as clients/hub fetches a run's (http(s)://, or
// file:// for a directory every validator sees at the same path), and
// checks that sha256(file ‖ miner pubkey) is its commitment. It returns
// the file's path and the bytes it downloaded (0 when dir already held a
// verified copy; the file's size when it was fetched, also when its
// commitment is then wrong). The download is bounded by MaxFileSize(sub.Params);
// opts.MaxSize is ignored, so every validator draws the same line.
//
// A failure that is the miner's is an *Invalid: a repo the hub refuses
// (ReasonBadRepo), a revision the hub does not hold (ReasonNotFound), a
// file over the bound or a declared parameter count over c.MaxParams
// (ReasonTooLarge), content that does not hash to the revision
// (ReasonRevisionMismatch) or to the commitment (ReasonCommitmentMismatch),
// and a hub that stays unreachable or answers with an error through the
// hub's retries (opts.Attempts, 5 tries over about 15 s by default:
// ReasonUnavailable). Cancellation and errors of the validator's own
// filesystem (dir unwritable, a full disk) are returned as they are: they
// say nothing about the model.
func Fetch(ctx context.Context, sub Submission, dir string, c Constraints, opts hub.FetchOptions) (path string, downloaded int64, err error) {
	if err := ctx.Err(); err != nil {
		return "", 0, err
	}
	switch {
	case sub.Params == 0:
		return "", 0, invalid(ReasonParams, nil, "the submission declares 0 parameters")
	case sub.Params > c.MaxParams:
		return "", 0, invalid(ReasonTooLarge, nil, "the submission declares %d parameters, over the competition's %d", sub.Params, c.MaxParams)
	}
	if _, err := hub.ParseRepo(sub.Repo); err != nil {
		return "", 0, invalid(ReasonBadRepo, err, "%v", err)
	}
	rev := hex.EncodeToString(sub.Revision[:])
	limit := MaxFileSize(sub.Params)
	dst := filepath.Join(dir, rev+hub.Ext)

	// A verified copy already here: no download (hub.Fetch would hash it
	// once for the revision and again here for the commitment).
	got, commit, size, err := digests(dst, sub.Miner)
	switch {
	case err == nil && got == sub.Revision:
		if size > limit {
			return "", 0, invalid(ReasonTooLarge, hub.ErrTooLarge, "the file is %d bytes, over the %d a model of %d parameters may have", size, limit, sub.Params)
		}
		if commit != sub.Commitment {
			return "", 0, commitmentMismatch(sub, commit)
		}
		return dst, 0, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", 0, err
	}

	opts.MaxSize = limit
	path, err = hub.Fetch(ctx, sub.Repo, rev, dir, opts)
	if err != nil {
		return "", 0, classify(ctx, err)
	}
	_, commit, size, err = digests(path, sub.Miner)
	if err != nil {
		return "", 0, err
	}
	if commit != sub.Commitment {
		return "", size, commitmentMismatch(sub, commit)
	}
	return path, size, nil
}

func commitmentMismatch(sub Submission, got [32]byte) *Invalid {
	return invalid(ReasonCommitmentMismatch, nil, "sha256(file ‖ %s) is %x, the commitment %x", sub.Miner, got, sub.Commitment)
}

// digests hashes the file at path: sha256(file) and sha256(file ‖ miner),
// in one pass, and its size.
func digests(path string, miner solana.PublicKey) (rev, commit [32]byte, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return rev, commit, 0, err
	}
	defer f.Close()
	hr, hc := sha256.New(), sha256.New()
	size, err = io.Copy(io.MultiWriter(hr, hc), f)
	if err != nil {
		return rev, commit, 0, fmt.Errorf("reading %s: %w", path, err)
	}
	hc.Write(miner[:])
	hr.Sum(rev[:0])
	hc.Sum(commit[:0])
	return rev, commit, size, nil
}

// classify sorts a hub.Fetch error into the miner's (an *Invalid) and
// everything else, returned as it is.
func classify(ctx context.Context, err error) error {
	var integrity *hub.IntegrityError
	switch {
	case ctx.Err() != nil:
		// Only the caller's context: an http.Client.Timeout also reads as
		// context.DeadlineExceeded, and a hub that slow is the miner's.
		return err
	case errors.Is(err, hub.ErrNotFound):
		return invalid(ReasonNotFound, err, "%v", err)
	case errors.Is(err, hub.ErrTooLarge):
		return invalid(ReasonTooLarge, err, "%v", err)
	case errors.As(err, &integrity):
		return invalid(ReasonRevisionMismatch, err, "%v", err)
	case local(err):
		return err
	}
	// The network, a refusing status (403, 5xx after every retry), a
	// stalled transfer, a file:// entry that is not a regular file.
	return invalid(ReasonUnavailable, err, "%v", err)
}

// local reports whether err is the validator's own filesystem failing
// (creating, writing, syncing or renaming in its directory, or reading a
// file:// repo), not the network. The HTTP client wraps every network
// error in a *url.Error, and the hub all its own file operations' in
// *fs.PathError or *os.LinkError; a full disk is ENOSPC whatever wraps it.
func local(err error) bool {
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return false
	}
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &se) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}
