package journal

import (
	"bytes"
	"encoding/binary"
	"os"
	"slices"
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
	ps := int64(os.Getpagesize())
	var want [][]byte
	for i := 0; j.off < 3*ps+ps/2; i++ {
		p := bytes.Repeat([]byte{byte(i) | 1}, 100)
		want = append(want, p)
		appendAll(t, j, [][]byte{p})
	}
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
	file, err := os.ReadFile(seg.path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file[:end], seg.m[:end]) {
		t.Fatal("the file and the mapping differ after the pass")
	}
	for i := range 50 { // past the released pages' end, and through a roll
		p := bytes.Repeat([]byte{byte(i) | 0x80}, 2000)
		want = append(want, p)
		appendAll(t, j, [][]byte{p})
	}
	j.syncPassForTest()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, _ := mustOpen(t, dir, opts)
	checkRecords(t, got, want)
}

// TestFillAhead: with RollAhead and SyncInterval, a background pass maps
// the pages after the end of the records (at least minFill of them) and
// the first ones of the segment made ahead, which then read as zeros
// still; after a roll the new segment goes on from what was filled; a
// recovery reads every record.
func TestFillAhead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const segSize = 1 << 20
	opts := Options{Sync: SyncInterval, SyncInterval: time.Hour, SegmentSize: segSize, RollAhead: true}
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
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, rec, _ := mustOpen(t, dir, opts)
	checkRecords(t, rec, want)
}
