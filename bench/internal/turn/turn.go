// Package turn orders compared subjects within a round of interleaved
// measurements, so that no subject owns a position's luck: first after a
// garbage collection, or always right after the heaviest neighbour.
package turn

// Order is the order in which n compared subjects take their turns in
// round r: the listed order rotated by r, so over n rounds each subject
// holds every position once.
func Order(r, n int) []int {
	order := make([]int, n)
	for j := range order {
		order[j] = (j + r) % n
	}
	return order
}
