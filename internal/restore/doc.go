// Package restore decides about restores, without I/O: which snapshot
// "latest" means, whether a restore may start, the Job that runs the
// restore executor and what it is told, and the state machine that takes
// an OpenBaoRestore from Pending to its outcome over what was observed.
// All of a restore's progress is in its status, so a restarted operator
// resumes where the last one was.
package restore
