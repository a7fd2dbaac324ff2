//go:build !amd64

package dynamic

func prefetch(uintptr) {}
