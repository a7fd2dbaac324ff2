package codec

import (
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/blockv1"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
)

// Info describes a filter block. The fields every version shares come
// first; the layout of the block's own version is in V1, V2 or V3 (the
// others are zero), so that no field changes its meaning with the version.
type Info struct {
	Version     int
	Hash        HashKind
	Keys        int // keys stored (distinct keys)
	Seed        uint32
	Bytes       int
	BitsPerKey  float64 // Bytes*8/Keys
	ExpectedFPR float64 // modelled from the layout and its load (version 2: before its few second-line reads)
	AlwaysMaybe bool    // the builder fell back to a block that answers "maybe" for every key

	V1 V1Info
	V2 V2Info
	V3 V3Info
	V4 V4Info
}

// V1Info is the layout of a version-1 block.
type V1Info struct {
	Blocks          int
	Buckets         int
	FingerprintBits int
	Load            float64 // keys / (4·Buckets)
}

// V2Info is the layout of a version-2 block.
type V2Info struct {
	Lines           int // 64-byte lines
	WideLines       int // lines holding fingerprints of the wider width (FORMAT.md)
	Buckets         int
	FingerprintBits int     // of the narrow lines
	Load            float64 // keys / (4·Buckets)
}

// V3Info is the layout of a version-3 block.
type V3Info struct {
	Lines         int     // 64-byte lines
	RemainderBits int     // r
	Quotients     int     // Q, quotients per line
	LineCapacity  int     // K, keys a line holds
	SeededLines   bool    // lines chosen by the seeded hash (keys crowded lines under the fixed one)
	Load          float64 // keys / (K·Lines)
}

// BuildStats describes the last block a Builder produced: the fields every
// version shares, then what its own version's build did in V1, V2 or V3.
type BuildStats struct {
	Version  int    // format version of the block
	Keys     int    // keys stored (distinct keys)
	Bytes    int    // block size
	Seed     uint32 // seed the block was built with
	Reseeds  int    // placements abandoned and restarted under a new seed
	Fallback bool   // placement failed under every cap: the block answers "maybe" for every key

	V1 V1Stats
	V2 V2Stats
	V3 V3Stats
	V4 V4Stats
}

// V1Stats is what a version-1 build did.
type V1Stats struct {
	V1Info
	PlannedLoad  float64 // load the sizing aimed for
	BumpedBlocks int     // blocks that needed more buckets than planned
}

// V2Stats is what a version-2 build did.
type V2Stats struct {
	V2Info
	PrimaryOverflow int // keys that did not fit their primary line
	Overflowed      int // keys stored in their secondary line (evictions included)
	OverflowLines   int // lines with at least one overflow bit set
	OverflowBits    int // overflow bits set, over all lines
	// SecondLineShare is the expected share of negative lookups that read
	// a second line: the set overflow bits of each line over its O, averaged.
	SecondLineShare float64
}

// V3Stats is what a version-3 build did.
type V3Stats struct {
	V3Info
	PrimaryOverflow int // keys that did not fit their primary line
	Overflowed      int // keys stored in their secondary line (evictions included)
	OverflowLines   int // lines whose threshold is below Q
	// SecondLineShare is the expected share of negative lookups that read
	// a second line: each line's quotients at or past its threshold over
	// Q, averaged.
	SecondLineShare float64
}

func v1Stats(st blockv1.Stats) V1Stats {
	return V1Stats{V1Info: V1Info{Blocks: st.Blocks, Buckets: st.Buckets, FingerprintBits: st.FingerprintBits, Load: st.Load},
		PlannedLoad: st.PlannedLoad, BumpedBlocks: st.BumpedBlocks}
}

func v2Stats(st linev2.Stats) V2Stats {
	return V2Stats{V2Info: V2Info{Lines: st.Lines, WideLines: st.WideLines, Buckets: st.Buckets, FingerprintBits: st.FingerprintBits, Load: st.Load},
		PrimaryOverflow: st.PrimaryOverflow, Overflowed: st.Overflowed, OverflowLines: st.OverflowLines, OverflowBits: st.OverflowBits,
		SecondLineShare: st.SecondLineShare}
}

func v3Stats(st linev3.Stats) V3Stats {
	return V3Stats{V3Info: V3Info{Lines: st.Lines, RemainderBits: st.RemainderBits, Quotients: st.Quotients, LineCapacity: st.LineCapacity,
		SeededLines: st.SeededLines, Load: st.Load},
		PrimaryOverflow: st.PrimaryOverflow, Overflowed: st.Overflowed, OverflowLines: st.OverflowLines, SecondLineShare: st.SecondLineShare}
}
