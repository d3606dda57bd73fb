// Package kafkaconn is the one home of how walrelay reaches Kafka: TLS and
// SASL settings, and topic creation with the wait for the partitions'
// leaders.
//
// Input: the Kafka security settings (Security) and topics to create.
// Output: a Conn whose client options every stage's client takes, warnings
// about what is allowed but unprotected, and created topics whose every
// partition answers on its leader. Invariant: a setting that would send the
// password in the clear without the user's opt-in is an error, never a
// warning; given a wait, a created topic is handed back only once every
// partition answers on its leader.
package kafkaconn
