// Package sink produces outbox events to Kafka with franz-go.
//
// Input: decode.Tx parts in commit order. Output: one Kafka record per event
// (topic, key, value, headers "id" and extras, commit-time timestamp, murmur2
// key partitioning) and one checkpoint acknowledgement per record that Kafka
// has acknowledged.
// Invariant: the sink never confirms an LSN itself and never swallows a
// failed record: the first record that finally fails is reported on Err and
// nothing after it is acknowledged to the checkpoint in its place. Only a
// record refused on its own is dead-lettered, never one whose batch was.
// A record's topic is decided on before the topic is created (topics.go):
// one outside Config.TopicAllow, walrelay's own, or past
// Config.MaxCreatedTopics is a poison event, never produced there.
// With Config.ExactlyOnce (exactlyonce.go) the records of whole
// transactions and a checkpoint record go into Kafka transactions, and no
// transaction is acknowledged to the checkpoint before its Kafka
// transaction committed; transactions a committed checkpoint covers are
// acknowledged without being produced again.
package sink
