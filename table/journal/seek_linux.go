package journal

import (
	"errors"
	"os"
	"syscall"
)

// The lseek(2) whences that find the data and the holes of a file.
const (
	seekData = 3 // SEEK_DATA
	seekHole = 4 // SEEK_HOLE
)

// segmentDataEnd is dataEnd(m, from) for m, the mapping of all of f, reading
// only the parts of f that lseek(SEEK_DATA) says hold data: the holes it
// skips (preallocated blocks never written, with no page of them cached)
// read as zeros. So the unused rest of a segment costs no page faults and
// caches no pages; readahead is off meanwhile, so that reading one data
// region does not cache the zeros after it. Where lseek cannot tell, it
// reads all of m.
func segmentDataEnd(f *os.File, m []byte, from int64) int64 {
	size := int64(len(m))
	if from >= size {
		return dataEnd(m, from)
	}
	rest := m[from&^int64(os.Getpagesize()-1):]
	if syscall.Madvise(rest, syscall.MADV_RANDOM) == nil {
		defer func() { _ = syscall.Madvise(rest, syscall.MADV_NORMAL) }()
	}
	fd := int(f.Fd())
	end := from
	for off := from; off < size; {
		d, err := syscall.Seek(fd, off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			break // no data from off on
		}
		var h int64
		if err == nil {
			h, err = syscall.Seek(fd, d, seekHole)
		}
		if err != nil || d < off || h <= d {
			return dataEnd(m, from)
		}
		if d >= size {
			break
		}
		h = min(h, size)
		lo := max(d, from)
		if e := dataEnd(m[:h], lo); e > lo {
			end = e
		}
		off = h
	}
	return end
}
