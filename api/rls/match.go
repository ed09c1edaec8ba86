package rls

import (
	"strings"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// match is what one request descriptor matched in a Config.
type match struct {
	limit    *Limit   // nil: no limit applies
	override bool     // limit is the request's own (descriptor.limit)
	shared   []string // per entry: the share_threshold pattern standing for its value, or ""
	statsKey string   // the metrics key, relative to the domain
}

// knows reports whether c configures domain.
func (c *Config) knows(domain string) bool {
	_, ok := c.domains[domain]
	return ok
}

// match finds the limit of descriptor d in domain, as the reference does:
// an unknown domain has none (its overrides too); a known domain takes the
// descriptor's own limit when it carries one; otherwise the entries are
// walked level by level, each matched by its exact key and value, then by
// the level's wildcard values in config order, then by its key alone, and
// the limit is the one found at the last entry, if any.
func (c *Config) match(domain string, d *rlcommon.RateLimitDescriptor) match {
	lv, ok := c.domains[domain]
	if !ok {
		return match{}
	}
	if o := d.GetLimit(); o != nil {
		l := &Limit{
			RequestsPerUnit: o.GetRequestsPerUnit(),
			// envoy.type.v3.RateLimitUnit numbers its units as the response does.
			Unit:           rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()),
			UnitMultiplier: 1,
		}
		if m := o.GetUnitMultiplier(); m != nil {
			l.UnitMultiplier, l.multiplierSet = m.GetValue(), true
		}
		return match{limit: l, override: true, statsKey: keysOnly(d)}
	}
	var (
		m     match
		parts = make([]string, 0, len(d.Entries)) // stats key, per entry
		leaf  *node
	)
	for i, e := range d.Entries {
		if lv == nil {
			return match{}
		}
		n, wild := lv.lookup(e.Key, e.Value)
		if n == nil {
			return match{}
		}
		part := n.key
		switch {
		case wild && n.shareThreshold:
			if m.shared == nil {
				m.shared = make([]string, len(d.Entries))
			}
			m.shared[i] = n.value
			part += "_" + n.value
		case wild && n.valueToMetric && e.Value != "":
			part += "_" + e.Value
		case wild:
			part += "_" + n.value
		case n.value != "":
			part += "_" + n.value
		case n.valueToMetric && e.Value != "":
			part += "_" + e.Value
		}
		parts = append(parts, part)
		leaf = n
		lv = n.children
	}
	if leaf == nil || leaf.limit == nil {
		return match{}
	}
	m.limit = leaf.limit
	if leaf.limit.DetailedMetric {
		for i, e := range d.Entries {
			switch {
			case m.shared != nil && m.shared[i] != "":
				parts[i] = e.Key + "_" + m.shared[i]
			case e.Value != "":
				parts[i] = e.Key + "_" + e.Value
			default:
				parts[i] = e.Key
			}
		}
	}
	m.statsKey = strings.Join(parts, ".")
	return m
}

// keysOnly is the metrics key of an override: the entries' keys, without
// their values, so that runtime values never become metric labels.
func keysOnly(d *rlcommon.RateLimitDescriptor) string {
	keys := make([]string, len(d.Entries))
	for i, e := range d.Entries {
		keys[i] = e.Key
	}
	return strings.Join(keys, ".")
}

// lookup finds the descriptor of lv that an entry matches; wild reports a
// match by a wildcard value.
func (lv *level) lookup(key, value string) (n *node, wild bool) {
	if n := lv.exact[entry{key, value}]; n != nil && value != "" {
		return n, false
	}
	for _, w := range lv.wild {
		if w.key == key && globMatch(w.parts, value) {
			return w, true
		}
	}
	return lv.keyOnly[key], false
}

// globMatch reports whether value matches a pattern split at its '*'s
// (at least two parts): each '*' stands for any run of bytes, the empty one
// included.
func globMatch(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
