package media

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// The least an upload may send, 256 KiB within DefaultUploadChunkTimeout,
// carries a 16 MiB file over 2G: GPRS with two uplink timeslots at CS-2
// (2 x 13.4 kbit/s, the common handset's uplink) sends 256 KiB in 78 s and
// 16 MiB in 84 minutes. A minute for each 256 KiB (35 kbit/s) cut it at
// its first 256 KiB, so such a phone's files never arrived.
func TestUploadFloorCarriesA16MiBFileOn2G(t *testing.T) {
	t.Parallel()
	const gprs = 2 * 13_400 / 8 // bytes a second
	perChunk := time.Duration(store.MediaChunkSize) * time.Second / gprs
	if perChunk >= DefaultUploadChunkTimeout {
		t.Fatalf("256 KiB over GPRS's two uplink slots takes %s, past the %s the server waits for each 256 KiB of an upload", perChunk, DefaultUploadChunkTimeout)
	}
	if whole := time.Duration(DefaultMaxBytes) * time.Second / gprs; whole > DefaultMaxBytes/store.MediaChunkSize*DefaultUploadChunkTimeout {
		t.Fatalf("16 MiB over GPRS takes %s, past the %s the server lets it take", whole, DefaultMaxBytes/store.MediaChunkSize*DefaultUploadChunkTimeout)
	}
}
