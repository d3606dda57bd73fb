// Command inbox is an example consumer built on package inbox: it reads
// the events the demo (test/cmd/demo, `make demo`) writes through
// walrelay — OrderCreated {orderId, customer, total} on
// outbox.event.order and CustomerLoyaltyReached on outbox.event.customer —
// and keeps a projection in PostgreSQL: per customer the number of orders,
// their total and the loyalty events, plus the timeline of every event
// applied (event_log). Each event's effect is applied exactly once, however
// often Kafka delivers it and wherever the process is killed.
//
//	go run ./examples/inbox --pg-url postgres://... --brokers localhost:9092
//
// Input: walrelay's records of the demo's topics. Output: the projection
// tables (Schema) and the inbox table, in the database of --pg-url.
// Invariant: each event's effect is committed once, with its id in the
// inbox table, in its aggregate's order.
//
// Exit codes: 0 after SIGINT/SIGTERM, 1 on a runtime failure, 2 on bad flags
// or a database it cannot set up.
package main
