/* A real master and one daemon on 127.0.0.1 with free ports and a temp dir, for the C ABI
 * suites (which are C, so this is a C interface over tests/process_harness). */
#ifndef MOONCAKE_TESTS_CLUSTER_H_
#define MOONCAKE_TESTS_CLUSTER_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_cluster mc_cluster;

/* Starts mooncake-master (with a 1 s read lease, so lease tests stay short) and mooncaked
 * with a segment of segment_size bytes. NULL on failure, after printing why. */
mc_cluster *mc_cluster_start(uint64_t segment_size);
/* The same with the master's read lease set to lease_ms (a benchmark wants it long enough
 * that re-reads within it hit the daemon's read cache). */
mc_cluster *mc_cluster_start_with_lease(uint64_t segment_size, int lease_ms);
const char *mc_cluster_socket(const mc_cluster *c);
int mc_cluster_daemon_port(const mc_cluster *c);

/* Sends sig to the daemon (or master) and waits for it to exit. */
void mc_cluster_kill_daemon(mc_cluster *c, int sig);
void mc_cluster_kill_master(mc_cluster *c, int sig);
/* Starts them again with the same socket, ports and flags; 0 once serving. */
int mc_cluster_restart_daemon(mc_cluster *c);
int mc_cluster_restart_master(mc_cluster *c);

void mc_cluster_stop(mc_cluster *c);

#ifdef __cplusplus
}
#endif

#endif /* MOONCAKE_TESTS_CLUSTER_H_ */
