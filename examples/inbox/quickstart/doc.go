// Command quickstart is the consumer docs/inbox.md walks a newcomer
// through, from go get to a running consumer: main.go is quoted there
// verbatim (TestDocQuotesRun in package inbox) and run against PostgreSQL
// and Kafka by TestQuickstart.
//
//	DATABASE_URL=postgres://... KAFKA_BROKERS=localhost:9092 go run ./examples/inbox/quickstart
//
// Input: the records of outbox.event.order (walrelay's, an "id" and an
// "eventType" header each). Output: accounts.orders + 1 per OrderCreated
// event, for the account of the record key, and the inbox table.
// Invariant: each event's effect is committed once, however often Kafka
// delivers it.
package main
