package sink

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLz4FramesOf64KiBBlocks: batches are lz4 frames whose descriptor
// says 64 KiB blocks and no checksums (as Kafka's Java producer writes),
// and franz-go's own decompressor gives back the batch, for a batch
// smaller than a block and one of many blocks.
func TestLz4FramesOf64KiBBlocks(t *testing.T) {
	c := newLz4Compressor()
	for _, n := range []int{300, 1 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var src []byte
			for i := 0; len(src) < n; i++ {
				src = fmt.Appendf(src, `{"ts": %d, "seq": %d, "note": "outbox event %d"}`, 1733000000000000+i, i, i%97)
			}
			src = src[:n]
			var dst bytes.Buffer
			out, codec := c.Compress(&dst, src)
			if codec != kgo.CodecLz4 {
				t.Fatalf("codec %d, want lz4 (%d)", codec, kgo.CodecLz4)
			}
			// Frame: magic 04 22 4D 18, FLG, BD; BD bits 6-4 are the
			// block maximum size: 4 = 64 KiB ... 7 = 4 MiB.
			if len(out) < 6 || !bytes.Equal(out[:4], []byte{0x04, 0x22, 0x4d, 0x18}) {
				t.Fatalf("not an lz4 frame: % x", out[:min(len(out), 8)])
			}
			if bs := (out[5] >> 4) & 7; bs != 4 {
				t.Errorf("frame block size index %d, want 4 (64 KiB)", bs)
			}
			// FLG as Kafka's Lz4BlockOutputStream writes it: version 01,
			// independent blocks, no block or content checksum, no
			// content size (0x60). Without a content checksum the frame
			// ends with the end mark.
			if out[4] != 0x60 {
				t.Errorf("frame FLG %#02x, want 0x60 (Kafka's: no checksums)", out[4])
			}
			if end := out[len(out)-4:]; !bytes.Equal(end, []byte{0, 0, 0, 0}) {
				t.Errorf("frame ends with % x, want the end mark 00 00 00 00", end)
			}
			back, err := kgo.DefaultDecompressor().Decompress(out, kgo.CodecLz4)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, src) {
				t.Errorf("decompressed %d bytes differ from the %d compressed", len(back), len(src))
			}
		})
	}
}
