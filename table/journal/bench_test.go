package journal

import (
	"fmt"
	"testing"
	"time"
)

// compact takes an empty snapshot, which removes every full segment, so a
// long benchmark does not fill the disk.
func compact(b *testing.B, j *Journal) {
	b.Helper()
	w, err := j.StartSnapshot()
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppend appends 64-byte payloads (80-byte frames) with SyncNone:
// the cost of the hot path, rolls to new 16 MiB segments included.
func BenchmarkAppend(b *testing.B) {
	j, _, err := Open(b.TempDir(), Options{Sync: SyncNone}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	p := make([]byte, 64)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := j.Append(p); err != nil {
			b.Fatal(err)
		}
		if i%(1<<20) == 1<<20-1 {
			b.StopTimer()
			compact(b, j)
			b.StartTimer()
		}
	}
}

// BenchmarkCommitInterval is what a Commit adds to each record with
// SyncInterval: publishing the offset for the background msync, and the
// look for a background error to report (none here).
func BenchmarkCommitInterval(b *testing.B) {
	j, _, err := Open(b.TempDir(), Options{Sync: SyncInterval, SyncInterval: time.Hour}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(make([]byte, 64)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := j.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutFrame is the CPU cost of Append alone: encoding a 64-byte
// payload into memory already mapped (BenchmarkAppend adds the page faults
// of writing to fresh pages of a new file, one per 51 records).
func BenchmarkPutFrame(b *testing.B) {
	buf := make([]byte, 4096)
	p := make([]byte, 64)
	size := frameSize(len(p))
	var scratch [12]byte
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	off := int64(0)
	for i := range b.N {
		if off+size > int64(len(buf)) {
			off = 0
		}
		putFrame(buf[off:off+size], 0x12345678, &scratch, uint64(i), p)
		off += size
	}
}

// BenchmarkAppendCommitAlways appends 64-byte payloads in batches of 64 with
// SyncAlways: one msync per batch (group commit). ns/op is per record.
func BenchmarkAppendCommitAlways(b *testing.B) {
	j, _, err := Open(b.TempDir(), Options{Sync: SyncAlways}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	p := make([]byte, 64)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := j.Append(p); err != nil {
			b.Fatal(err)
		}
		if i%64 == 63 {
			if err := j.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if i%(1<<20) == 1<<20-1 {
			b.StopTimer()
			compact(b, j)
			b.StartTimer()
		}
	}
	if err := j.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReplay opens a journal of 1M 64-byte records (5 segments): the
// recovery time of a shard, reported as records/s.
func BenchmarkReplay(b *testing.B) {
	const records = 1 << 20
	dir := b.TempDir()
	j, _, err := Open(dir, Options{Sync: SyncNone}, nil)
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 64)
	for i := range records {
		p[i%64]++
		if err := j.Append(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(records * 64)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		n := 0
		j, _, err := Open(dir, Options{Sync: SyncNone}, func([]byte) error { n++; return nil })
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
		if n != records {
			b.Fatalf("replayed %d records, want %d", n, records)
		}
	}
	b.ReportMetric(float64(records*b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkSnapshotAppend writes 64-byte records to a snapshot (buffered
// writes to a file, no sync until Commit).
func BenchmarkSnapshotAppend(b *testing.B) {
	j, _, err := Open(b.TempDir(), Options{Sync: SyncNone}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	w, err := j.StartSnapshot()
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 64)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := w.Append(p); err != nil {
			b.Fatal(err)
		}
		if i%(1<<20) == 1<<20-1 { // keep the file small
			b.StopTimer()
			if err := w.Abort(); err != nil {
				b.Fatal(err)
			}
			if w, err = j.StartSnapshot(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	if err := w.Abort(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPutFrame2 is BenchmarkPutFrame for format 2 and the payload of
// the commonest record, one repeat hit on a bucket the journal holds (a
// count entry: 7 bytes here), and for a 64-byte one.
func BenchmarkPutFrame2(b *testing.B) {
	for _, n := range []int{7, 64} {
		b.Run(fmt.Sprintf("payload=%d", n), func(b *testing.B) {
			buf := make([]byte, 4096)
			p := make([]byte, n)
			size := frame2Size(len(p))
			var scratch [frame2Scratch]byte
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			off := int64(0)
			for i := range b.N {
				if off+size > int64(len(buf)) {
					clear(buf)
					off = 0
				}
				putFrame2(buf[off:off+size], 0x12345678, &scratch, uint64(i), p)
				off += size
			}
		})
	}
}
