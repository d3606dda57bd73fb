// Package sink produces outbox events to Kafka with franz-go.
//
// Input: decode.Tx parts in commit order. Output: one Kafka record per event
// (topic, key, value, headers "id" and extras, commit-time timestamp, murmur2
// key partitioning) and one acknowledgement to the tracker (package
// checkpoint) per record that Kafka has acknowledged.
// Invariant: the sink never confirms an LSN itself and never swallows a
// failed record: the first record that finally fails is reported on Err and
// nothing after it is acknowledged to the tracker in its place. Only a
// record refused on its own is dead-lettered, never one whose batch was.
//
// Produce admits each event (admit.go: produce, isolate, dead-letter with
// its reason, or halt, decided from the event and what the sink knows),
// then hands its record over under the delivery strategy (delivery.go). A
// record's topic is decided on before the topic is created (topics.go):
// one outside Config.TopicAllow, walrelay's own, or past
// Config.MaxCreatedTopics is a poison event, never produced there.
// With OnPoisonPark (park.go) a poison event parks its aggregate (topic
// and key): its later events are dead-lettered behind it, each with a
// park record on the state topic acknowledged like its records, until a
// release record (walrelay dlq) covers them.
// With Config.ExactlyOnce (exactlyonce.go) the records of whole
// transactions and a checkpoint record (kafkastate) go into Kafka
// transactions, and no transaction is acknowledged to the tracker before
// its Kafka transaction committed; transactions a committed checkpoint
// covers are acknowledged without being produced again. "Partition" here
// is always Kafka's.
package sink
