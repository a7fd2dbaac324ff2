//go:build !amd64

package codec

import "github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"

// v3UseBMI2 is false: v3ProbeBMI2 is amd64 assembly.
const v3UseBMI2 = false

func v3ProbeBMI2(block, key []byte) (outcome, x uint64) {
	return v3Other, keyhash.MulHash(key)
}
