package blockv1

import (
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/relocate"
)

// Candidates derives, from a mixed key hash, the key's two candidate buckets
// inside its block of m buckets and its fingerprint. The builder and every
// reader go through this one function.
//
// The block was chosen from the high 32 bits by multiply-shift; the low half
// of that product is still uniform within the block and picks the first
// bucket. The second bucket is another bucket of the same block, never the
// first (so each key has eight slots when m > 1), from bits 16..31; the
// fingerprint comes from bits 0..15, which chose neither.
func Candidates(x uint64, blocks, m uint32, f uint) (i1, i2, fp uint32) {
	_, rest := keyhash.Reduce(keyhash.Hi(x), blocks)
	i1, _ = keyhash.Reduce(rest, m)
	i2 = i1
	if m > 1 {
		i2 = i1 + 1 + keyhash.AltOffset(x, m-1)
		if i2 >= m {
			i2 -= m
		}
	}
	return i1, i2, keyhash.Fingerprint(x, f)
}

// placer assigns the keys of one block to slots offline. A static filter
// knows every key before placing any, so instead of random-walk kicking it
// solves the placement as a bipartite b-matching (keys on one side, buckets
// of capacity 4 on the other) with augmenting paths found by breadth-first
// search: a key goes in directly when one of its buckets has room; otherwise
// the BFS looks for the shortest chain of moves, each resident key to its
// other bucket, that ends at a bucket with room. Augmenting paths make the
// matching maximum, so a key that finds no path proves the block cannot be
// placed at this size; the builder then gives the block one more bucket.
//
// The course report on cuckoo hashing with union-find cycle prediction
// predicts failure before kicking. That test (keys per
// connected component at most slots per bucket × buckets) is exact only for
// single-slot buckets; with four slots a dense sub-cluster inside a roomy
// component still fails. Here the BFS is itself exact and bounded by the
// block (a few hundred buckets), so a failed attempt costs no more than the
// prediction would, and it is the BFS that decides.
type placer struct {
	b1, b2 []uint32 // per key: candidate buckets
	fp     []uint32 // per key: fingerprint
	count  []uint8  // per bucket: occupied slots
	slot   [][bucket.Slots]int32
	search relocate.Search
}

// table is the placer as relocate.Find reads it.
type table struct{ p *placer }

func (t table) Room(b uint32) bool { return t.p.count[b] < bucket.Slots }

// Items numbers the keys in bucket b's occupied slots by their index plus
// one, 0 being an empty slot.
func (t table) Items(b uint32) (items [relocate.Slots]uint32) {
	for j, e := range t.p.slot[b][:t.p.count[b]] {
		items[j] = uint32(e) + 1
	}
	return items
}

// Other is the other bucket of key v-1 in bucket b: its buckets sum to b
// and the other.
func (t table) Other(b, v uint32) uint32 { return t.p.b1[v-1] + t.p.b2[v-1] - b }

func (p *placer) reset(k, m int) {
	p.b1 = frame.Resize(p.b1, k)
	p.b2 = frame.Resize(p.b2, k)
	p.fp = frame.Resize(p.fp, k)
	p.count = frame.Resize(p.count, m)
	clear(p.count)
	p.slot = frame.Resize(p.slot, m)
}

// place tries to put every key of the block into m buckets.
func (p *placer) place(keys []uint64, blocks, m uint32, f uint) bool {
	p.reset(len(keys), int(m))
	if len(keys) == 0 {
		return true
	}
	for k, x := range keys {
		p.b1[k], p.b2[k], p.fp[k] = Candidates(x, blocks, m, f)
	}
	for k := range keys {
		if !p.insert(int32(k)) {
			return false
		}
	}
	return true
}

func (p *placer) put(k int32, bkt uint32) {
	p.slot[bkt][p.count[bkt]] = k
	p.count[bkt]++
}

func (p *placer) remove(k int32, bkt uint32) {
	s := &p.slot[bkt]
	n := p.count[bkt] - 1
	for j := uint8(0); j <= n; j++ {
		if s[j] == k {
			s[j] = s[n]
			break
		}
	}
	p.count[bkt] = n
}

// insert places key k, moving others along a shortest augmenting path if
// both its buckets are full.
func (p *placer) insert(k int32) bool {
	a, b := p.b1[k], p.b2[k]
	// Two-choice greedy: the emptier bucket keeps later BFS searches short.
	if p.count[a] < bucket.Slots || p.count[b] < bucket.Slots {
		if p.count[b] < p.count[a] {
			a = b
		}
		p.put(k, a)
		return true
	}
	path, ok := relocate.Find(&p.search, table{p}, a, b, relocate.Limits{})
	if !ok {
		return false
	}
	// Carried out from the far end, each move frees the slot the one
	// before it fills, until a root has room for k.
	for i := len(path) - 1; i >= 0; i-- {
		st := path[i]
		e := p.slot[st.From][st.Slot]
		p.remove(e, st.From)
		p.put(e, st.To)
	}
	p.put(k, path[0].From)
	return true
}

// appendBuckets encodes the block's buckets after a successful place.
func (p *placer) appendBuckets(dst []uint64, f uint) []uint64 {
	for u := range p.count {
		var fps [bucket.Slots]uint32
		for j := uint8(0); j < p.count[u]; j++ {
			fps[j] = p.fp[p.slot[u][j]]
		}
		dst = append(dst, bucket.Encode(&fps, f))
	}
	return dst
}
