package topk

import "unsafe"

// canPrefetchW is whether the processor has PREFETCHW (CPUID leaf
// 80000001h, ECX bit 8: PRFCHW, 3DNowPrefetch); without it Prefetch does
// nothing.
var canPrefetchW = cpuidExt1ECX()&(1<<8) != 0

// prefetchW is PREFETCHW: it asks for the cache line of p, to be written,
// and returns without waiting for it, a hint with no effect on what the
// program does. Only where canPrefetchW.
//
//go:noescape
func prefetchW(p unsafe.Pointer)

// cpuidExt1ECX returns ECX of CPUID leaf 80000001h, extended features.
func cpuidExt1ECX() uint32
