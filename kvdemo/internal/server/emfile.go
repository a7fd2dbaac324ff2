package server

import "syscall"

// syscallEMFILE: accept failing for want of file descriptors is
// temporary; the server waits instead of exiting.
const syscallEMFILE = syscall.EMFILE
