//go:build !amd64

package codec

// v3UseBMI2 is false: v3ProbeBMI2 is amd64 assembly.
const v3UseBMI2 = false

func v3ProbeBMI2(block []byte, h uint64) (outcome, x uint64) { return v3Other, 0 }
