//go:build !linux

package journal

import "os"

// segmentDataEnd is dataEnd(m, from) for m, the mapping of all of f.
func segmentDataEnd(_ *os.File, m []byte, from int64) int64 { return dataEnd(m, from) }
