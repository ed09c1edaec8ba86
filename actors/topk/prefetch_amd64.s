#include "textflag.h"

// func prefetchW(p unsafe.Pointer)
TEXT ·prefetchW(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX): the assembler has no name for it
	RET

// func cpuidExt1ECX() uint32
TEXT ·cpuidExt1ECX(SB), NOSPLIT, $0-4
	MOVL $0x80000001, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
