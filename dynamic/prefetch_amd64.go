package dynamic

// prefetch asks the processor to bring the cache line at addr in, without
// waiting for it: unlike a load, it does not hold up the instructions
// after it while the line comes from memory.
//
//go:noescape
func prefetch(addr uintptr)
