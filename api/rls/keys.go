package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/table"
)

// Namespace is the table.Request.Namespace of every RLS bucket. Rule names
// are [a-z0-9_.-]{1,64}, so a namespace with ':' can never be a rule's,
// and check_rate ids without a rule have none: RLS buckets share no
// counter with any other check.
const Namespace = "envoy:rls"

// hashMark starts the hashed tail of an id too long for the table.
const hashMark = "#sha256:"

// bucketID returns the table id of a descriptor of domain: the domain,
// then for each entry '|', its key, and '=' and its value (or '~' and the
// share_threshold pattern standing for it), each part escaped so that the
// id is unambiguous ('%', '|', '=', '~' and '#' as %XX), e.g.
// "rl|remote_address=10.0.0.1|path~/api/*". An id longer than
// table.MaxIDLen keeps a readable prefix and ends with "#sha256:" and the
// hex SHA-256 of the whole id: a raw '#' appears in no other id, and two
// long ids share a bucket only if SHA-256 collides.
func bucketID(domain string, d *rlcommon.RateLimitDescriptor, shared []string) string {
	var b strings.Builder
	n := len(domain)
	for _, e := range d.Entries {
		n += 2 + len(e.Key) + len(e.Value)
	}
	b.Grow(min(n+8, 4*table.MaxIDLen))
	escapeTo(&b, domain)
	for i, e := range d.Entries {
		b.WriteByte('|')
		escapeTo(&b, e.Key)
		if shared != nil && shared[i] != "" {
			b.WriteByte('~')
			escapeTo(&b, shared[i])
			continue
		}
		b.WriteByte('=')
		escapeTo(&b, e.Value)
	}
	id := b.String()
	if len(id) <= table.MaxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	cut := table.MaxIDLen - len(hashMark) - 2*len(sum)
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return id[:cut] + hashMark + hex.EncodeToString(sum[:])
}

// escapeTo writes s to b with the id's special bytes as %XX.
func escapeTo(b *strings.Builder, s string) {
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', '|', '=', '~', '#':
			b.WriteString(s[start:i])
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&0xf])
			start = i + 1
		}
	}
	b.WriteString(s[start:])
}
