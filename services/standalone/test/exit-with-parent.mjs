// Preloaded into every service process the e2e harness spawns: when the test process goes away, even by
// SIGKILL, the IPC channel closes and the service exits, so no orphan keeps answering on shared NATS subjects.
process.on('disconnect', () => process.exit(0));
