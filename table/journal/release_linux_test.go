package journal

import (
	"bytes"
	"encoding/binary"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// mapped reports, for each page of m, whether this process's page tables
// map it (/proc/self/pagemap, bit 63: present). ok is false if pagemap
// cannot be read here.
func mapped(t *testing.T, m []byte) (present []bool, ok bool) {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Logf("no page map: %v", err)
		return nil, false
	}
	defer f.Close()
	ps := uintptr(os.Getpagesize())
	first := uintptr(unsafe.Pointer(unsafe.SliceData(m))) / ps
	buf := make([]byte, 8*((uintptr(len(m))+ps-1)/ps))
	if _, err := f.ReadAt(buf, int64(first*8)); err != nil {
		t.Logf("page map: %v", err)
		return nil, false
	}
	for i := 0; i < len(buf); i += 8 {
		present = append(present, binary.LittleEndian.Uint64(buf[i:])>>63 == 1)
	}
	return present, true
}

// appendPages appends records of 100 bytes to j, and to want, until they
// end in j's fourth page.
func appendPages(t *testing.T, j *Journal, want [][]byte) [][]byte {
	t.Helper()
	ps := int64(os.Getpagesize())
	for i := 0; j.off < 3*ps+ps/2; i++ {
		p := bytes.Repeat([]byte{byte(i) | 1}, 100)
		want = append(want, p)
		appendAll(t, j, [][]byte{p})
	}
	return want
}

// sameOnDisk fails t unless seg's file holds what its mapping does up to
// end.
func sameOnDisk(t *testing.T, seg *segment, end int64) {
	t.Helper()
	file, err := os.ReadFile(seg.path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file[:end], seg.m[:end]) {
		t.Fatal("the file and the mapping differ after the pass")
	}
}

// finishReleased appends records past the released pages and through a
// roll, runs a pass, closes j and checks that a recovery of dir with opts
// reads want and them.
func finishReleased(t *testing.T, dir string, j *Journal, opts Options, want [][]byte) {
	t.Helper()
	for i := range 50 {
		p := bytes.Repeat([]byte{byte(i) | 0x80}, 2000)
		want = append(want, p)
		appendAll(t, j, [][]byte{p})
	}
	j.syncPassForTest()
	checkAfterClose(t, dir, j, opts, want)
}

// TestSyncReleasesWrittenPages: an msync pass first takes the pages
// written for good (all but the one holding the end of the records) out
// of the page tables, so that writeback need not flush them from other
// CPUs' TLBs page by page; the page being written stays mapped; nothing
// written is lost (the mapping, the file and a recovery read the same
// records, before and after more appends).
func TestSyncReleasesWrittenPages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Sync: SyncInterval, SyncInterval: time.Hour, SegmentSize: MinSegmentSize}
	j, _, _ := mustOpen(t, dir, opts)
	want := appendPages(t, j, nil)
	seg, end := j.cur, j.off
	before, ok := mapped(t, seg.m)
	if ok && !slices.Equal(before[:4], []bool{true, true, true, true}) {
		t.Fatalf("pages 0-3 mapped before the pass: %v, want all (they were written)", before[:4])
	}
	j.syncPassForTest()
	if err := j.Commit(); err != nil {
		t.Fatalf("Commit after the pass: %v", err)
	}
	if after, ok := mapped(t, seg.m); ok {
		if got := after[:4]; !slices.Equal(got, []bool{false, false, false, true}) {
			t.Errorf("pages 0-3 mapped after the pass (records end at %d): %v, want [false false false true]", end, got)
		}
	}
	sameOnDisk(t, seg, end)
	finishReleased(t, dir, j, opts, want)
}

// TestFillAhead: with RollAhead and SyncInterval or SyncNone, a
// background pass maps the pages after the end of the records (at least
// minFill of them) and the first ones of the segment made ahead, which
// then read as zeros still; after a roll the new segment goes on from what
// was filled; a recovery reads every record.
func TestFillAhead(t *testing.T) {
	t.Parallel()
	eachBackgroundMode(t, testFillAhead)
}

func testFillAhead(t *testing.T, mode SyncMode) {
	dir := t.TempDir()
	const segSize = 1 << 20
	opts := Options{Sync: mode, SyncInterval: time.Hour, SegmentSize: segSize, RollAhead: true}
	j, _, _ := mustOpen(t, dir, opts)
	ps := int64(os.Getpagesize())
	var want [][]byte
	add := func(n int, b byte) {
		for i := range n {
			p := bytes.Repeat([]byte{b ^ byte(i) | 1}, 1000)
			want = append(want, p)
			appendAll(t, j, [][]byte{p})
		}
	}
	add(10, 0x10)
	j.syncPassForTest() // makes the next segment, then fills
	seg, end := j.cur, j.off
	if _, ok := mapped(t, seg.m); !ok {
		t.Skip("no page map to look at")
	}
	first, last := end/ps, (end+minFill-1)/ps
	got, _ := mapped(t, seg.m)
	for p := first; p <= last; p++ {
		if !got[p] {
			t.Fatalf("page %d (records end at %d) not mapped after the pass; pages %d to %d should be", p, end, first, last)
		}
	}
	if n := segSize/ps - 1; got[n] {
		t.Errorf("the segment's last page %d is mapped; the fill should stop about %d bytes past the end", n, minFill)
	}
	if !bytes.Equal(seg.m[end:end+minFill], make([]byte, minFill)) {
		t.Error("the filled pages do not read as zeros")
	}
	if file, err := os.ReadFile(seg.path); err != nil || !bytes.Equal(file[end:], make([]byte, segSize-end)) {
		t.Errorf("the file past the records is not zeros (%v)", err)
	}
	if j.next == nil {
		t.Fatal("no segment made ahead")
	}
	next := j.next
	if got, _ := mapped(t, next.m); !got[0] || !got[minFill/ps-1] {
		t.Errorf("the first pages of the segment made ahead are not mapped: page 0 %v, page %d %v", got[0], minFill/ps-1, got[minFill/ps-1])
	}
	add(1100, 0x20) // past the first segment's end: a roll into next
	if j.cur != next {
		t.Fatal("no roll into the segment made ahead")
	}
	j.syncPassForTest()
	end = j.off
	if got, _ := mapped(t, next.m); !got[end/ps] || !got[(end+minFill-1)/ps] {
		t.Errorf("after the roll, pages %d and %d (records end at %d) not both mapped", end/ps, (end+minFill-1)/ps, end)
	}
	checkAfterClose(t, dir, j, opts, want)
}

// TestSyncNoneReleasesWrittenPages: with SyncNone and RollAhead, which
// never msync, a background pass still takes the pages written for good
// out of the page tables (all but the one holding the end of the
// records), so that the kernel's writeback finds no mapping of them
// either; nothing written is lost (the mapping, the file and a recovery
// read the same records), and Sync still msyncs every page written, the
// released ones too.
func TestSyncNoneReleasesWrittenPages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	var synced [][2]uintptr // the address ranges msynced
	opts := Options{Sync: SyncNone, SyncInterval: time.Hour, SegmentSize: MinSegmentSize, RollAhead: true}
	opts.hooks = &testHooks{msync: func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		synced = append(synced, [2]uintptr{p, p + uintptr(len(b))})
		return nil
	}}
	j, _, _ := mustOpen(t, dir, opts)
	want := [][]byte{[]byte("first")}
	appendAll(t, j, want)
	// The pass the first segment's creation asked for is taken back if it
	// has not begun, else waited for: no pass but the test's own runs
	// while it appends.
	select {
	case <-j.wake:
	default:
	}
	j.syncPassForTest()
	want = appendPages(t, j, want)
	seg, end := j.cur, j.off
	before, ok := mapped(t, seg.m)
	if !ok {
		t.Skip("no page map to look at")
	}
	if !slices.Equal(before[:4], []bool{true, true, true, true}) {
		t.Fatalf("pages 0-3 mapped before the pass: %v, want all (they were written)", before[:4])
	}
	j.syncPassForTest()
	if got, _ := mapped(t, seg.m); !slices.Equal(got[:4], []bool{false, false, false, true}) {
		t.Errorf("pages 0-3 mapped after the pass (records end at %d): %v, want [false false false true]", end, got[:4])
	}
	mu.Lock()
	n := len(synced)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("the pass msynced %d ranges; SyncNone never does", n)
	}
	sameOnDisk(t, seg, end)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(synced)
	mu.Unlock()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(seg.m)))
	if len(got) != 1 || got[0][0] != base || got[0][1] != base+uintptr(end) {
		t.Errorf("Sync msynced %v; want the segment's bytes [0, %d) at %#x, the released pages too", got, end, base)
	}
	finishReleased(t, dir, j, Options{Sync: SyncNone, SegmentSize: MinSegmentSize}, want)
}
