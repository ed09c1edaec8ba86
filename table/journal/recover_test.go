package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTornTailEveryOffset damages the last record of a journal at every
// byte offset, in several ways, and checks that Open yields exactly the
// valid prefix, cuts the damage as a torn tail and appends after it.
func TestTornTailEveryOffset(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	opts := testOptions(SyncNone)
	lastRecord := bytes.Repeat([]byte("torn\xff"), 12) // 60 bytes: a 76-byte frame and 4 of padding
	want := append(testPayloads(1, 19), lastRecord)
	writeJournal(t, src, opts, want)
	orig, err := os.ReadFile(filepath.Join(src, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, orig)
	if len(offs) != len(want) {
		t.Fatalf("the segment holds %d frames, want %d", len(offs), len(want))
	}
	last, end := offs[len(offs)-1], offs[len(offs)-1]+frameSize(len(lastRecord))

	mutations := []struct {
		name string
		do   func(b []byte, i int64) []byte
	}{
		{"zeros from", func(b []byte, i int64) []byte { clear(b[i:end]); return b }},
		{"truncated at", func(b []byte, i int64) []byte { return b[:i] }},
		{"byte flipped at", func(b []byte, i int64) []byte { b[i] ^= 0xff; return b }},
		{"bit flipped at", func(b []byte, i int64) []byte { b[i] ^= 1 << (i % 8); return b }},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			for i := last; i < end; i++ {
				img := m.do(bytes.Clone(orig), i)
				dir := t.TempDir()
				path := filepath.Join(dir, segmentName(1))
				if err := os.WriteFile(path, img, 0o644); err != nil {
					t.Fatal(err)
				}
				wantN := len(want) - 1
				if bytes.Equal(img, orig) { // zeros over zero padding
					wantN = len(want)
				}
				tail := img[last:min(end, int64(len(img)))]
				wantTorn := 0
				if wantN < len(want) && !allZero(tail) {
					wantTorn = 1
				}
				j, got, rec, err := openCollect(t, dir, opts)
				if err != nil {
					t.Fatalf("%s %d: Open: %v", m.name, i, err)
				}
				checkRecords(t, got, want[:wantN])
				if rec.TornTails != wantTorn || (rec.BytesDropped > 0) != (wantTorn == 1) {
					t.Fatalf("%s %d: got %d torn tails, %d bytes dropped; want %d torn tails", m.name, i, rec.TornTails, rec.BytesDropped, wantTorn)
				}
				if wantTorn == 1 {
					evidence, err := os.ReadFile(path + brokenSuffix)
					if err != nil {
						t.Fatalf("%s %d: no evidence file: %v", m.name, i, err)
					}
					if wantEv := tail[:dataEnd(tail, 0)]; !bytes.Equal(evidence, wantEv) {
						t.Fatalf("%s %d: evidence holds %x, want %x", m.name, i, evidence, wantEv)
					}
				}
				if err := j.Append([]byte("after")); err != nil {
					t.Fatal(err)
				}
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
				_, got, rec = mustOpen(t, dir, opts)
				checkRecords(t, got, append(want[:wantN:wantN], []byte("after")))
				if rec.TornTails != 0 {
					t.Fatalf("%s %d: second Open cut %d torn tails, want 0", m.name, i, rec.TornTails)
				}
			}
		})
	}
}

// TestPowerLoss simulates power loss after an msync: the bytes written after
// it are zeros, garbage, or only their first k 512-byte sectors. Open must
// yield a valid prefix holding every synced record.
func TestPowerLoss(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(testSeed(t), 1))

	src := t.TempDir()
	opts := testOptions(SyncAlways)
	all := testPayloads(1, 60)
	j, _, _ := mustOpen(t, src, opts)
	appendAll(t, j, all[:30]) // Commit msyncs
	syncOff := j.off
	path := filepath.Join(src, segmentName(1))
	synced, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all[30:] {
		if err := j.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if j.cur.first != 1 {
		t.Fatal("the test wants every record in one segment")
	}
	final, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	finalEnd := j.off
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	const sector = 512
	s0 := syncOff &^ (sector - 1)
	type variant struct {
		name string
		img  []byte
	}
	var variants []variant
	for k := int64(0); s0+k*sector < finalEnd+sector; k++ {
		written := min(s0+k*sector, finalEnd)
		img := bytes.Clone(synced)
		copy(img[s0:written], final[s0:written])
		variants = append(variants, variant{fmt.Sprintf("first %d sectors", k), img})
		img = bytes.Clone(img)
		from := max(written, syncOff)
		for i := from; i < min(from+int64(rng.IntN(4096)+1), int64(len(img))); i++ {
			img[i] = byte(rng.Uint32())
		}
		variants = append(variants, variant{fmt.Sprintf("first %d sectors then garbage", k), img})
	}
	for _, v := range variants {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), v.img, 0o644); err != nil {
			t.Fatal(err)
		}
		_, got, _, err := openCollect(t, dir, opts)
		if err != nil {
			t.Fatalf("%s: Open: %v", v.name, err)
		}
		checkPrefix(t, got, all, 30)
	}
}

// buildJournal writes a multi-segment journal with a snapshot in the middle
// and returns its directory and the records its replay must yield.
func buildJournal(t testing.TB, opts Options, before, after int) (string, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	all := testPayloads(1, before+after)
	j, _, _ := mustOpen(t, dir, opts)
	appendAll(t, j, all[:before])
	if before > 0 {
		w, err := j.StartSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range all[:before] {
			if err := w.Append(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	appendAll(t, j, all[before:])
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, all
}

// TestRandomFlips flips random bits and bytes anywhere in a journal with a
// snapshot and several segments: Open must yield a valid prefix or a clean
// ErrCorrupt, and with Repair always a valid prefix.
func TestRandomFlips(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	opts := testOptions(SyncNone)
	src, all := buildJournal(t, opts, 150, 450)
	files := names(t, src)
	if len(files) < 4 {
		t.Fatalf("journal files %v: want a snapshot and several segments", files)
	}
	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	images := make(map[string][]byte)
	for _, n := range files {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		images[n] = b
	}
	repairOpts := opts
	repairOpts.Repair = true
	corrupt := 0
	for round := range rounds {
		name := files[rng.IntN(len(files))]
		b := bytes.Clone(images[name])
		limit := len(b)
		if rng.IntN(2) == 0 { // half the time, hit the data
			limit = int(max(dataEnd(b, 0), 1))
		}
		off := rng.IntN(limit)
		what := "bit"
		if rng.IntN(2) == 0 {
			b[off] ^= 1 << rng.IntN(8)
		} else {
			what = "byte"
			b[off] = byte(rng.Uint32())
		}
		dir := t.TempDir()
		for _, n := range files {
			img := images[n]
			if n == name {
				img = b
			}
			if err := os.WriteFile(filepath.Join(dir, n), img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		j, got, _, err := openCollect(t, dir, opts)
		opened := err == nil
		if err != nil {
			if _, ok := isCorrupt(err); !ok {
				t.Fatalf("round %d (%s flipped in %s at %d): got %v, want a prefix or ErrCorrupt", round, what, name, off, err)
			}
			if got := names(t, dir); !slices.Equal(got, files) {
				t.Fatalf("round %d: a failed Open changed the directory: %v, want %v", round, got, files)
			}
			corrupt++
		} else {
			checkPrefix(t, got, all, 0)
			_ = j.Close()
		}
		// A failed Open changed nothing, and after a successful one Repair
		// must find the same records.
		j, got2, _, err := openCollect(t, dir, repairOpts)
		if err != nil {
			t.Fatalf("round %d (%s flipped in %s at %d): Open with Repair: %v", round, what, name, off, err)
		}
		checkPrefix(t, got2, all, 0)
		if opened {
			checkRecords(t, got2, got)
		}
		_ = j.Close()
	}
	t.Logf("%d rounds, %d refused with ErrCorrupt", rounds, corrupt)
}

// threeSegments writes a journal of exactly three segments and returns its
// directory, records, and the number of records in each segment.
func threeSegments(t testing.TB, opts Options) (string, [][]byte, []int) {
	t.Helper()
	dir := t.TempDir()
	j, _, _ := mustOpen(t, dir, opts)
	var all [][]byte
	var per []int
	for i := 1; ; i++ {
		p := testPayload(i)
		first := j.cur
		if err := j.Append(p); err != nil {
			t.Fatal(err)
		}
		if j.cur != first {
			per = append(per, 0)
			if len(per) == 4 {
				break
			}
		}
		all = append(all, p)
		per[len(per)-1]++
	}
	// The record that opened a fourth segment is dropped with it.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	if err := os.Remove(filepath.Join(dir, segs[3])); err != nil {
		t.Fatal(err)
	}
	return dir, all, per[:3]
}

func TestMidJournalDamage(t *testing.T) {
	t.Parallel()
	opts := testOptions(SyncNone)
	src, all, per := threeSegments(t, opts)
	segs := segmentFiles(t, src)
	seg1, err := os.ReadFile(filepath.Join(src, segs[0]))
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, seg1)
	end1 := offs[len(offs)-1] + frameSize(len(all[per[0]-1]))

	tests := []struct {
		name       string
		damage     func(t *testing.T, dir string)
		file       string // the file the error names
		offset     int64
		reason     string
		kept       int      // records left after Repair
		brokenWant []string // evidence files after Repair
	}{
		{
			name: "damaged record in the first segment",
			damage: func(t *testing.T, dir string) {
				flip(t, filepath.Join(dir, segs[0]), offs[5]+frameHeaderSize)
			},
			file: segs[0], offset: offs[5], reason: "checksum", kept: 5,
			brokenWant: []string{segs[0] + ".broken", segs[1] + ".broken", segs[2] + ".broken"},
		},
		{
			name: "bad header of the middle segment",
			damage: func(t *testing.T, dir string) {
				flip(t, filepath.Join(dir, segs[1]), 20)
			},
			file: segs[1], offset: 0, reason: "header", kept: per[0],
			brokenWant: []string{segs[1] + ".broken", segs[2] + ".broken"},
		},
		{
			name: "missing middle segment",
			damage: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, segs[1])); err != nil {
					t.Fatal(err)
				}
			},
			file: segs[0], offset: end1, reason: "missing", kept: per[0],
			brokenWant: []string{segs[2] + ".broken"},
		},
		{
			name: "empty middle segment",
			damage: func(t *testing.T, dir string) {
				if err := os.Truncate(filepath.Join(dir, segs[1]), 0); err != nil {
					t.Fatal(err)
				}
			},
			file: segs[1], offset: 0, reason: "empty file", kept: per[0],
			brokenWant: []string{segs[2] + ".broken"}, // the empty file is removed
		},
		{
			name: "damaged last record of the first segment",
			damage: func(t *testing.T, dir string) {
				flip(t, filepath.Join(dir, segs[0]), offs[len(offs)-1]+8)
			},
			file: segs[0], offset: offs[len(offs)-1], reason: "checksum", kept: per[0] - 1,
			brokenWant: []string{segs[0] + ".broken", segs[1] + ".broken", segs[2] + ".broken"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			tt.damage(t, dir)
			_, _, _, err := openCollect(t, dir, opts)
			ce, ok := isCorrupt(err)
			if !ok {
				t.Fatalf("Open: got %v, want ErrCorrupt", err)
			}
			if wantPath := filepath.Join(dir, tt.file); ce.Path != wantPath || ce.Offset != tt.offset {
				t.Errorf("damage at %s offset %d, want %s offset %d", ce.Path, ce.Offset, wantPath, tt.offset)
			}
			for _, want := range []string{filepath.Join(dir, tt.file), fmt.Sprintf("offset %d", tt.offset), tt.reason} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "--journal-repair") {
				t.Errorf("error %q names the daemon's flag; the daemon adds that hint", err)
			}
			if got := matching(t, dir, ".broken"); len(got) != 0 {
				t.Errorf("a failed Open left %v, want the directory unchanged", got)
			}

			repair := opts
			repair.Repair = true
			var logs logBuffer
			repair.Logger = logs.logger()
			j, got, rec, err := openCollect(t, dir, repair)
			if err != nil {
				t.Fatalf("Open with Repair: %v", err)
			}
			checkRecords(t, got, all[:tt.kept])
			if !rec.Repaired || rec.BytesDropped == 0 {
				t.Errorf("Recovery = %+v, want Repaired and bytes dropped", rec)
			}
			if got := matching(t, dir, ".broken"); strings.Join(got, " ") != strings.Join(tt.brokenWant, " ") {
				t.Errorf("evidence files %v, want %v", got, tt.brokenWant)
			}
			if !strings.Contains(logs.String(), "repair") {
				t.Errorf("the repair was not logged:\n%s", logs.String())
			}
			if err := j.Append([]byte("after repair")); err != nil {
				t.Fatal(err)
			}
			if got, want := j.Seq(), uint64(tt.kept+1); got != want {
				t.Errorf("Seq() = %d, want %d", got, want)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, rec = mustOpen(t, dir, opts)
			checkRecords(t, got, append(all[:tt.kept:tt.kept], []byte("after repair")))
			if rec.Repaired || rec.TornTails != 0 {
				t.Errorf("Open after the repair: %+v, want a clean recovery", rec)
			}
		})
	}
}

// flip inverts the byte at off in the file at path.
func flip(t testing.TB, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGarbageAfterEarlierSegment: nonzero bytes after the last record of a
// segment that is followed by its continuation lose nothing: Open logs them.
func TestGarbageAfterEarlierSegment(t *testing.T) {
	t.Parallel()
	opts := testOptions(SyncNone)
	dir, all, _ := threeSegments(t, opts)
	path := filepath.Join(dir, segmentFiles(t, dir)[0])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] = 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	opts.Logger = logs.logger()
	_, got, rec := mustOpen(t, dir, opts)
	checkRecords(t, got, all)
	if rec.TornTails != 0 || rec.Repaired {
		t.Errorf("Recovery = %+v, want nothing cut", rec)
	}
	if !strings.Contains(logs.String(), "ignoring bytes after the end of a segment") {
		t.Errorf("the garbage was not logged:\n%s", logs.String())
	}
}

// TestBadSegmentFiles puts unusable files under segment names: as the last
// segment they are a torn tail; before it, ErrCorrupt.
func TestBadSegmentFiles(t *testing.T) {
	t.Parallel()
	opts := testOptions(SyncNone)
	src, all, per := threeSegments(t, opts)
	segs := segmentFiles(t, src)
	validHeader := func(name string) []byte {
		seq, _ := parseName(name, segmentPrefix, segmentSuffix)
		b := make([]byte, headerSize)
		putHeader(b, segmentMagic, seq, 42)
		return b
	}
	garbage := make([]byte, MinSegmentSize)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name    string
		content func(name string) []byte
		moved   bool // moved aside (else removed: nothing but zeros)
	}{
		{"zero-length", func(string) []byte { return nil }, false},
		{"header-only", validHeader, true},
		{"all-zero", func(string) []byte { return make([]byte, MinSegmentSize) }, false},
		{"garbage", func(string) []byte { return garbage }, true},
		{"foreign magic", func(name string) []byte {
			b := append(validHeader(name), make([]byte, 100)...)
			copy(b, "SQLite f")
			return b
		}, true},
		{"snapshot magic", func(name string) []byte {
			b := make([]byte, MinSegmentSize)
			seq, _ := parseName(name, segmentPrefix, segmentSuffix)
			putHeader(b, snapshotMagic, seq, 1)
			return b
		}, true},
		{"wrong first seq", func(name string) []byte {
			b := make([]byte, MinSegmentSize)
			seq, _ := parseName(name, segmentPrefix, segmentSuffix)
			putHeader(b, segmentMagic, seq+1, 1)
			return b
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name+" as last segment", func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			last := filepath.Join(dir, segs[2])
			if err := os.WriteFile(last, tt.content(segs[2]), 0o644); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			o := opts
			o.Logger = logs.logger()
			j, got, rec := mustOpen(t, dir, o)
			kept := per[0] + per[1]
			checkRecords(t, got, all[:kept])
			if rec.TornTails != 1 || rec.Repaired {
				t.Errorf("Recovery = %+v, want 1 torn tail", rec)
			}
			if _, err := os.Stat(last + brokenSuffix); (err == nil) != tt.moved {
				t.Errorf("evidence %s: stat error %v, want it to exist: %v", last+brokenSuffix, err, tt.moved)
			}
			if !strings.Contains(logs.String(), "last segment unusable") {
				t.Errorf("not logged:\n%s", logs.String())
			}
			if err := j.Append([]byte("new")); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, got, _ = mustOpen(t, dir, opts)
			checkRecords(t, got, append(all[:kept:kept], []byte("new")))
		})
		t.Run(tt.name+" as middle segment", func(t *testing.T) {
			t.Parallel()
			dir := copyDir(t, src)
			mid := filepath.Join(dir, segs[1])
			if err := os.WriteFile(mid, tt.content(segs[1]), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := openCollect(t, dir, opts)
			ce, ok := isCorrupt(err)
			if !ok || ce.Path != mid || ce.Offset != 0 {
				t.Fatalf("Open: got %v, want ErrCorrupt at %s offset 0", err, mid)
			}
		})
		t.Run(tt.name+" as only segment", func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, segmentName(1)), tt.content(segmentName(1)), 0o644); err != nil {
				t.Fatal(err)
			}
			j, got, rec := mustOpen(t, dir, opts)
			if len(got) != 0 || rec.TornTails != 1 || j.Seq() != 0 {
				t.Fatalf("got %d records, %+v, Seq %d; want none, 1 torn tail, Seq 0", len(got), rec, j.Seq())
			}
			if err := j.Append([]byte("first")); err != nil {
				t.Fatal(err)
			}
			if j.Seq() != 1 {
				t.Errorf("Seq() = %d, want 1", j.Seq())
			}
		})
	}
}

// TestForeignAndTempFiles: foreign files are logged and left alone, *.tmp
// files removed, evidence left alone silently.
func TestForeignAndTempFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncNone)
	want := testPayloads(1, 10)
	writeJournal(t, dir, opts, want)
	files := map[string]string{
		"notes.txt":                    "do not delete me",
		segmentName(99) + tmpSuffix:    "half-made segment",
		"snap-0000000000000005-1.tmp":  "half-made snapshot",
		segmentName(1) + brokenSuffix:  "old evidence",
		segmentName(1) + ".broken.3":   "older evidence",
		"seg-00000000000000zz.log":     "not a segment name",
		"SEG-0000000000000001.LOG":     "not a segment name either",
		"seg-0000000000000001.log.bak": "a backup",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	opts.Logger = logs.logger()
	_, got, _ := mustOpen(t, dir, opts)
	checkRecords(t, got, want)
	for n, c := range files {
		b, err := os.ReadFile(filepath.Join(dir, n))
		removed := strings.HasSuffix(n, tmpSuffix)
		if removed != os.IsNotExist(err) {
			t.Errorf("%s: read error %v, want removed=%v", n, err, removed)
		}
		if err == nil && string(b) != c {
			t.Errorf("%s: content %q, want %q untouched", n, b, c)
		}
		foreign := !removed && !isBroken(n)
		if got := strings.Contains(logs.String(), "name="+n+"\n") || strings.Contains(logs.String(), "name="+n+" "); got != foreign {
			t.Errorf("%s: logged as foreign: %v, want %v\n%s", n, got, foreign, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "foreign directory") {
		t.Errorf("the foreign directory was not logged:\n%s", logs.String())
	}
}

// TestTornTailLogged checks the log line of a torn tail: file, offset and
// bytes dropped.
func TestTornTailLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := testOptions(SyncNone)
	want := testPayloads(1, 5)
	writeJournal(t, dir, opts, want)
	path := filepath.Join(dir, segmentName(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, b)
	last := offs[len(offs)-1]
	flip(t, path, last+4)
	var logs logBuffer
	opts.Logger = logs.logger()
	j, got, rec := mustOpen(t, dir, opts)
	checkRecords(t, got, want[:4])
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	dropped := int64(frameHeaderSize + len(want[4])) // up to the last nonzero byte
	if rec.BytesDropped != dropped {
		t.Errorf("BytesDropped = %d, want %d", rec.BytesDropped, dropped)
	}
	for _, s := range []string{"torn tail cut", "file=" + path, fmt.Sprintf("offset=%d", last), fmt.Sprintf("bytes_dropped=%d", dropped), "checksum"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log does not contain %q:\n%s", s, logs.String())
		}
	}
	j, _, _ = mustOpen(t, dir, opts)
	appendAll(t, j, want[4:])
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	flip(t, path, last+4) // the same record, torn again
	mustOpen(t, dir, opts)
	if got := matching(t, dir, brokenSuffix); strings.Join(got, " ") != segmentName(1)+".broken "+segmentName(1)+".broken.1" {
		t.Errorf("evidence files %v, want .broken and .broken.1", got)
	}
}

// TestReplayError: an error from replay stops Open, wrapped with the file,
// and leaves the directory as it was.
func TestReplayError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name   string
		failAt int    // the replay call that fails (1-based)
		file   string // the file the error names
	}{
		{"in the snapshot", 3, snapshotName(10)},
		{"in a segment", 15, segmentName(11)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, _ := buildJournal(t, testOptions(SyncNone), 10, 10)
			segs := segmentFiles(t, dir)
			last := filepath.Join(dir, segs[len(segs)-1])
			b, err := os.ReadFile(last)
			if err != nil {
				t.Fatal(err)
			}
			offs := frameOffsets(t, b)
			flip(t, last, offs[len(offs)-1]+4) // a torn tail Open would cut
			before := names(t, dir)
			n := 0
			_, _, err = Open(dir, testOptions(SyncNone), func([]byte) error {
				if n++; n == tt.failAt {
					return boom
				}
				return nil
			})
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), tt.file) {
				t.Fatalf("Open: got %v, want boom naming %s", err, tt.file)
			}
			if n != tt.failAt {
				t.Errorf("replay called %d times, want %d (Open stops at the error)", n, tt.failAt)
			}
			if got := names(t, dir); !slices.Equal(got, before) {
				t.Errorf("files after a failed Open: %v, want %v", got, before)
			}
		})
	}
}
