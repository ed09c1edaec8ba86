package journal_test

import (
	"fmt"
	"log"
	"os"

	"github.com/ratelimitd/ratelimitd/table/journal"
)

func Example() {
	dir, err := os.MkdirTemp("", "journal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := journal.Options{Sync: journal.SyncAlways}

	// A new journal: nothing to replay.
	j, _, err := journal.Open(dir, opts, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, state := range []string{"a=1", "b=1", "a=2"} { // one batch
		if err := j.Append([]byte(state)); err != nil {
			log.Fatal(err)
		}
	}
	if err := j.Commit(); err != nil { // msynced: survives power loss
		log.Fatal(err)
	}
	if err := j.Close(); err != nil {
		log.Fatal(err)
	}

	// After a restart: replay in order; the last write of a key wins.
	state := map[string]string{}
	j, rec, err := journal.Open(dir, opts, func(p []byte) error {
		fmt.Printf("replay %s\n", p)
		state[string(p[:1])] = string(p[2:])
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	fmt.Println("records:", rec.SegmentRecords, "seq:", j.Seq(), "a:", state["a"])
	// Output:
	// replay a=1
	// replay b=1
	// replay a=2
	// records: 3 seq: 3 a: 2
}

func ExampleJournal_StartSnapshot() {
	dir, err := os.MkdirTemp("", "journal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := journal.Options{Sync: journal.SyncNone}
	j, _, err := journal.Open(dir, opts, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, state := range []string{"a=1", "b=1", "a=2", "b=2"} {
		if err := j.Append([]byte(state)); err != nil {
			log.Fatal(err)
		}
	}

	// The owner starts a snapshot of its current state (a=2, b=2) and
	// hands the writer to another goroutine...
	w, err := j.StartSnapshot()
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error)
	go func() {
		defer w.Abort() // no-op after Commit
		for _, state := range []string{"a=2", "b=2"} {
			if err := w.Append([]byte(state)); err != nil {
				done <- err
				return
			}
		}
		done <- w.Commit()
	}()
	// ...and goes on appending meanwhile.
	if err := j.Append([]byte("a=3")); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	if err := j.Close(); err != nil {
		log.Fatal(err)
	}

	j, rec, err := journal.Open(dir, opts, func(p []byte) error {
		fmt.Printf("replay %s\n", p)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	fmt.Println(rec.Snapshot, rec.SnapshotRecords, rec.SegmentRecords, j.Seq())
	// Output:
	// replay a=2
	// replay b=2
	// replay a=3
	// snap-0000000000000004.snap 2 1 5
}
