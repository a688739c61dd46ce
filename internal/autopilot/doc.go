// Package autopilot decides the Raft autopilot configuration of a
// cluster: the operator's defaults, the user's overrides, what OpenBao
// accepts, and when the configuration changes with the cluster's phase.
// It is a steady-state concern shared by bootstrap and upgrades; it is
// pure.
//
// Defaults: cleanup_dead_servers true, dead_server_last_contact_threshold
// 5m, min_quorum max(3, replicas/2+1); each overridable through
// configuration.raft.autopilot. OpenBao refuses min_quorum < 3 and a
// threshold < 1m only when cleanup is enabled (measured); Validate
// checks exactly that, plus fractional seconds that OpenBao silently drops.
//
// server_stabilization_time is 1 s while the cluster forms (PhaseBootstrap:
// fewer voters than replicas) and 10 s, OpenBao's default, once every
// replica votes (PhaseSteady). The short value only matters while joiners
// wait for promotion; afterwards a server that must be promoted is a
// replacement, and it should prove itself stable for longer before it
// counts towards quorum. Standard mode: Initialize writes the bootstrap
// values with the new token; the reconciler switches to steady with the
// stored token when PhaseOf says so (NeedsUpdate avoids writes).
//
// The replica gating costs time that no operator pass can win back: OpenBao
// retries auto-unseal on a fixed 5 s cycle from process start, and a joiner
// started after initialization joins within a second but is unsealed only
// by the next cycle. Joiners started together with pod-0 (a bare script's
// floor) have their cycle partly run when they join. Measured on the local
// node (make bench-bootstrap): 14.1 s to 3 voters gated, 11.2 s not.
//
// Self-init: the operator holds no token, so it cannot change autopilot
// later. SelfInitRequest adds an update of
// sys/storage/raft/autopilot/configuration to the self-init requests with
// the steady values (never the bootstrap ones, which nobody could revert).
// Measured cost: joiners take about 12 s to become voters instead of about
// 9 s. Changing it later is the user's business through their own
// self-init identity.
package autopilot
