package clientip

import "errors"

// The sentinel errors of the package. Every error it returns wraps exactly
// one of them; match them with errors.Is.
var (
	// ErrBadPrefix is matched by every error of ParsePrefixes. The message
	// names the bad item by its 1-based position and its text, for example
	//
	//	clientip: bad prefix: item 2 "10.0.0.0/33": prefix length must be 0..32
	ErrBadPrefix = errors.New("clientip: bad prefix")

	// ErrBadConfig is matched by every error of New. The message names the
	// Config field at fault, for example
	//
	//	clientip: bad config: IPv6Prefix 129: must be 1..128 (0 means 64)
	ErrBadConfig = errors.New("clientip: bad config")
)
