// Command testbed starts the test bed's PostgreSQL and Kafka, runs a command
// against them and stops them:
//
//	go run ./test/cmd/testbed -- go test -count=1 ./...
//
// The command gets WALRELAY_TEST_PG_URL, WALRELAY_TEST_KAFKA_BROKERS and
// WALRELAY_TEST_BED_DIR, so every test package (see package test/testbed)
// shares one PostgreSQL and one Kafka; WALRELAY_TEST_PG_VERSION (14 to 18)
// picks PostgreSQL's major version. It exits with the command's exit code,
// 2 when the servers cannot start. SIGINT and SIGTERM are passed on to the
// command (a second one kills it); the servers are stopped once it has exited.
//
// With -keep it starts the servers, prints the variables to export and exits,
// leaving them running; -stop DIR stops such a bed.
package main
