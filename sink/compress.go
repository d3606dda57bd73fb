package sink

import (
	"bytes"
	"sync"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lz4Compressor compresses record batches into lz4 frames of 64 KiB blocks
// without checksums, as Kafka's Java producer writes them
// (Lz4BlockOutputStream: no content checksum, no block checksums; Kafka's
// reader does not verify a content checksum either).
//
// N.B. the library's writer adds a content checksum (xxHash32 of the whole
// batch) by default: 2 % of walrelay's CPU in a backlog drain, for a field
// no Kafka reader checks.
//
// N.B. franz-go's own lz4 writers use the library's default 4 MiB blocks:
// each writer holds a 4 MiB input block and a 4 MiB output block however
// small the batch, one more lives in the client from its start, and the
// pooled blocks are dropped and allocated again after garbage collections.
// They were 12 of 14.5 MiB of walrelay's live heap in a backlog drain,
// which the collector's doubling turned into some 25 MiB of resident
// memory. A batch is at most max.message.bytes (1 MiB by default), so
// 64 KiB blocks cost little ratio.
type lz4Compressor struct{ pool sync.Pool }

func newLz4Compressor() *lz4Compressor {
	c := &lz4Compressor{}
	c.pool.New = func() any {
		w := lz4.NewWriter(nil)
		// Options are kept across Reset.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false))
		return w
	}
	return c
}

// Compress implements kgo.Compressor.
func (c *lz4Compressor) Compress(dst *bytes.Buffer, src []byte, _ ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	w := c.pool.Get().(*lz4.Writer)
	defer c.pool.Put(w)
	w.Reset(dst)
	if _, err := w.Write(src); err != nil {
		return nil, kgo.CodecError
	}
	if err := w.Close(); err != nil {
		return nil, kgo.CodecError
	}
	return dst.Bytes(), kgo.CodecLz4
}
