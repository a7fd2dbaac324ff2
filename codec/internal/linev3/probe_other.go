//go:build !amd64

package linev3

import "github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"

// UseBMI2 is false: ProbeBMI2 is amd64 assembly.
const UseBMI2 = false

func ProbeBMI2(block, key []byte) (outcome, x uint64) {
	return Other, keyhash.MulHash(key)
}
