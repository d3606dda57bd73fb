package kafkastate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWriteSharedOutlivesAnothersCancelation: a store shared by pipelines
// (package fleet). One pipeline's marker write is canceled (its attempt
// ended) while it waits in the client, ahead of another pipeline's write
// to the same partition: the other write is acknowledged all the same.
// Kafka is held back (kfake: the producer id is given only after the
// cancelation) so that both records wait in the client's buffer, the
// canceled one first.
func TestWriteSharedOutlivesAnothersCancelation(t *testing.T) {
	c := fakeKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openStore(ctx, t, c)
	held, canceled := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(held) })
		c.SleepControl(func() { <-canceled })
		return nil, nil, false
	})
	buffered := func(n int64) {
		t.Helper()
		for s.cl.BufferedProduceRecords() < n {
			select {
			case <-ctx.Done():
				t.Fatalf("%d records in the client's buffer, want %d", s.cl.BufferedProduceRecords(), n)
			case <-time.After(time.Millisecond):
			}
		}
	}
	actx, acancel := context.WithCancel(ctx)
	aerr := make(chan error, 1)
	go func() {
		aerr <- s.Write(actx, Marker{Slot: "stopping", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/10"})
	}()
	<-held
	buffered(1)
	berr := make(chan error, 1)
	go func() {
		bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
		defer bcancel()
		berr <- s.Write(bctx, Marker{Slot: "streaming", Database: "db", SystemIdentifier: "1", ConfirmedLSN: "0/20"})
	}()
	buffered(2)
	acancel()
	if err := <-aerr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled write returned %v, want context.Canceled", err)
	}
	close(canceled)
	if err := <-berr; err != nil {
		t.Fatalf("the other pipeline's write, behind a canceled one in the shared client: %v", err)
	}
	m, found, err := s.Read(ctx, "1", "db", "streaming")
	if err != nil || !found || m.ConfirmedLSN != "0/20" {
		t.Fatalf("Read of the other pipeline's marker = %+v, found %v, %v; want 0/20", m, found, err)
	}
}
