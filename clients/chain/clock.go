package chain

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gagliardetto/solana-go"
)

// Clock is the chain's clock: the Clock sysvar's unix_timestamp (whole
// seconds), which programs compare their deadlines with.
func (c *Client) Clock(ctx context.Context) (time.Time, error) {
	data, _, err := c.AccountData(ctx, solana.SysVarClockPubkey)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the Clock sysvar: %w", err)
	}
	// slot u64 | epoch_start_timestamp i64 | epoch u64 | leader_schedule_epoch u64 | unix_timestamp i64
	if len(data) < 40 {
		return time.Time{}, fmt.Errorf("the Clock sysvar has %d bytes, want 40", len(data))
	}
	return time.Unix(int64(binary.LittleEndian.Uint64(data[32:40])), 0), nil
}
