// Package compose checks the container and deployment files against the
// product: Dockerfile, .dockerignore, docker-compose.yml, deploy/compose/init.sql,
// deploy/kubernetes/walrelay.yaml, and the image make image builds.
// Input: those files, the walrelay binary built the way the Dockerfile builds
// it (from the context .dockerignore leaves), make image's OCI tar and the test
// bed's PostgreSQL and Kafka. Output: test failures naming the file and the
// setting that drifted.
// Invariant: every WALRELAY_* variable the files set is a flag of `walrelay
// run`, every probe hits a path the running binary serves on the port it
// listens on, init.sql creates the outbox table the end-to-end tests use, and
// make image's image has the Dockerfile's config and relays events as its
// non-root user on a read-only root.
package compose
