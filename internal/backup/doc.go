// Package backup decides about backups, without I/O: the schedule (cron
// slots under an injected clock), object names, retention, the preflight of
// a backup, the Job that runs the executor, what its termination message
// says, and how finished backups fold into the cluster's status.
package backup
