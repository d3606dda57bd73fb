package main

import "github.com/walrelay/walrelay/bench/internal/rig"

// Results is the raw JSON written to bench/results.
type Results struct {
	Started  string    `json:"started"`
	Finished string    `json:"finished"`
	Machine  Machine   `json:"machine"`
	Config   Config    `json:"config"`
	Fills    []Fill    `json:"fills"`
	Drains   []Drain   `json:"w1_drains"`
	Latency  []Latency `json:"w2_latency"`
	// NewTopics: the newtopic workload.
	NewTopics []NewTopic `json:"newtopic,omitempty"`
	// WALMessages is the wmsg workload (wmsg.go).
	WALMessages []WALCompare `json:"wmsg,omitempty"`
	// Inbox is the inbox workload (inbox.go).
	Inbox []InboxRun `json:"inbox,omitempty"`
	// Crashes is the crash workload (crash.go).
	Crashes []Crash `json:"crash,omitempty"`
	// Startups is the startup workload (startup.go).
	Startups []Startup `json:"startup,omitempty"`
	// Tracing is the tracing workload (tracing.go).
	Tracing []TracingRun `json:"tracing,omitempty"`
	// Fleet is the fleet workload (fleet.go).
	Fleet  *FleetRun `json:"fleet,omitempty"`
	Errors []string  `json:"errors,omitempty"`

	// inflightBytes is the walrelay binary's default --max-inflight-bytes
	// (its run -h), the bound the report checks the peak RSS against.
	inflightBytes int
}

// Machine says where the figures come from.
type Machine struct {
	Host       string `json:"host"`
	NProc      int    `json:"nproc"`
	CPUModel   string `json:"cpu_model"`
	MemTotalMB int64  `json:"mem_total_mb"`
	Kernel     string `json:"kernel"`
	// TCPCongestion is net.ipv4.tcp_congestion_control: on loopback it
	// decides whether the walsender's per-message sends leave as one
	// packet each (cubic) or partly coalesced (bbr, some runs), which
	// moves a single-row drain's rate by up to 2x.
	TCPCongestion string  `json:"tcp_congestion_control,omitempty"`
	GoVersion     string  `json:"go_version"`
	JavaVersion   string  `json:"java_version"`
	PGVersion     string  `json:"postgresql_version"`
	KafkaVersion  string  `json:"kafka_broker_version"`
	ConnectVer    string  `json:"kafka_connect_version"`
	DebeziumVer   string  `json:"debezium_version"`
	WalrelayRev   string  `json:"walrelay_revision"`
	LoadAtStart   string  `json:"loadavg_at_start"`
	LoadAtEnd     string  `json:"loadavg_at_end"`
	BusyShareRun  float64 `json:"machine_busy_share_whole_run"`
}

// Config is what was run.
type Config struct {
	Rows             int               `json:"w1_rows"`
	BatchTx          int               `json:"w1batch_transactions"`
	BatchRows        int               `json:"w1batch_rows_per_transaction"`
	Aggregates       int               `json:"aggregates"`
	PayloadBytes     float64           `json:"payload_bytes_avg"`
	Partitions       int               `json:"partitions"`
	W2Rates          []int             `json:"w2_rates"`
	W2Seconds        float64           `json:"w2_seconds"`
	StatusInterval   string            `json:"status_interval"`
	WalrelayArgs     []string          `json:"walrelay_args"`
	WalrelayInflight string            `json:"walrelay_max_inflight_bytes"`
	RecvArgs         []string          `json:"pg_recvlogical_args"`
	ConnectJVM       []string          `json:"connect_jvm_options"`
	ConnectWorker    map[string]string `json:"connect_worker"`
	DebeziumConfig   map[string]string `json:"debezium_connector"`
	Notes            []string          `json:"notes"`
}

// Fill is one backlog as written.
type Fill struct {
	Workload     string  `json:"workload"`
	Transactions int     `json:"transactions"`
	Rows         int     `json:"rows"`
	Seconds      float64 `json:"seconds"`
	RowsPerS     float64 `json:"rows_per_s"`
	WALBytes     int64   `json:"wal_bytes"`
	EndLSN       string  `json:"marker_lsn"`
}

// Drain is one relay draining one backlog.
// InflightPoint is walrelay's in-flight bytes at T seconds after its start.
type InflightPoint struct {
	T   float64 `json:"t_s"`
	MiB float64 `json:"mib"`
}

type Drain struct {
	Workload string `json:"workload"`
	Relay    string `json:"relay"`
	Events   int    `json:"events"`
	// Seconds from the relay's start (Debezium: the connector's creation on
	// a worker already running) until the slot's confirmed_flush_lsn passed
	// the backlog's last transaction.
	ConfirmedS float64 `json:"start_to_confirmed_s"`
	EventsPerS float64 `json:"events_per_s"`
	// Seconds until the relay's topic held every record (Kafka relays).
	RecordsS       float64 `json:"start_to_all_records_s,omitempty"`
	RecordsPerS    float64 `json:"events_per_s_to_all_records,omitempty"`
	RecordsInKafka int64   `json:"records_in_kafka,omitempty"`
	// The relay process: peak RSS (VmHWM) and CPU time (utime+stime) from
	// start to confirmation. Debezium: the Connect JVM, CPU counted from the
	// connector's creation; WorkerStartS/CPU are the JVM's start before.
	PeakRSSMB      float64 `json:"peak_rss_mb"`
	CPUS           float64 `json:"cpu_s"`
	CPUSPerMEvents float64 `json:"cpu_s_per_million_events"`
	WorkerStartS   float64 `json:"connect_worker_start_s,omitempty"`
	WorkerStartCPU float64 `json:"connect_worker_start_cpu_s,omitempty"`
	// The walsender serving the slot, and the Kafka broker, over the drain.
	WalsenderCPUS float64 `json:"walsender_cpu_s"`
	BrokerCPUS    float64 `json:"kafka_broker_cpu_s"`
	BusyShare     float64 `json:"machine_busy_share"`
	// OtherCPUS is the machine's busy CPU seconds over the drain less the
	// relay, its walsender, the broker and this harness: other work on
	// the machine that competed for the cores.
	OtherCPUS float64 `json:"other_processes_cpu_s"`
	// RelayCPUShare is the relay's CPU seconds per second of drain (1.0 is
	// one core busy throughout).
	RelayCPUShare float64 `json:"relay_cores_busy"`
	LoadBefore    string  `json:"loadavg_before"`
	LoadAfter     string  `json:"loadavg_after"`
	Profile       string  `json:"cpu_profile,omitempty"`
	// RSS: the relay's VmRSS (and RssAnon) every 250 ms from its start;
	// SteadyRSSMB (SteadyAnonMB) the median of those after the first
	// second.
	RSS          []rig.RSSPoint `json:"rss,omitempty"`
	SteadyRSSMB  float64        `json:"steady_rss_mb,omitempty"`
	SteadyAnonMB float64        `json:"steady_rss_anon_mb,omitempty"`
	// Inflight: walrelay's walrelay_inflight_bytes (the bytes counted
	// against --max-inflight-bytes) every 250 ms; its median and peak.
	Inflight          []InflightPoint `json:"inflight,omitempty"`
	InflightMedianMiB float64         `json:"inflight_median_mib,omitempty"`
	InflightPeakMiB   float64         `json:"inflight_peak_mib,omitempty"`
	Error             string          `json:"error,omitempty"`
}

// Stats are latency percentiles in milliseconds.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

// Latency is one relay at one rate.
type Latency struct {
	Relay        string  `json:"relay"`
	TargetRate   int     `json:"target_rate"`
	Seconds      float64 `json:"seconds"`
	Sent         int     `json:"sent"`
	AchievedRate float64 `json:"achieved_rate"`
	Received     int     `json:"received"`
	Duplicates   int     `json:"duplicates"`
	// InsertToConsume: consumer receive time minus the payload's "ts", the
	// row's clock_timestamp() at insert (single-row transactions, committed
	// at once). The same measure for every relay.
	InsertToConsume Stats `json:"insert_to_consume"`
	// RecordTSToConsume: receive time minus the Kafka record timestamp
	// (milliseconds). walrelay: the commit time; Debezium: when the
	// connector processed the event.
	RecordTSToConsume Stats `json:"record_timestamp_to_consume"`
	// SlotFloor: the slot's own floor over the same rows at the same time,
	// a second slot (test_decoding) read by pg_recvlogical: the time its
	// output line is read minus the payload's "ts"; beside every relay.
	SlotFloor *Stats `json:"slot_floor_insert_to_decode,omitempty"`
	// FloorRatioP50, FloorRatioP99: InsertToConsume over SlotFloor.
	FloorRatioP50 float64 `json:"floor_ratio_p50,omitempty"`
	FloorRatioP99 float64 `json:"floor_ratio_p99,omitempty"`
	// RelayCommitToAck is walrelay's own walrelay_commit_to_ack_seconds
	// histogram over the phase: commit to Kafka's acknowledgement.
	RelayCommitToAck *Bucketed `json:"walrelay_commit_to_ack,omitempty"`
	// RelayKafkaAck is walrelay_kafka_ack_seconds: handed to the Kafka
	// client to acknowledged, the Kafka part of RelayCommitToAck.
	RelayKafkaAck  *Bucketed `json:"walrelay_kafka_ack,omitempty"`
	CPUS           float64   `json:"cpu_s"`
	CPUSPerMEvents float64   `json:"cpu_s_per_million_events"`
	// WalsenderCPUS: the server process streaming the relay's slot;
	// BrokerCPUS: the Kafka broker; FloorCPUS: pg_recvlogical and its
	// walsender (the floor); BenchCPUS: this program (writers' client side,
	// consumer, floor parsing). Over the phase, like CPUS.
	WalsenderCPUS           float64 `json:"walsender_cpu_s"`
	WalsenderCPUSPerMEvents float64 `json:"walsender_cpu_s_per_million_events"`
	BrokerCPUS              float64 `json:"broker_cpu_s"`
	BrokerCPUSPerMEvents    float64 `json:"broker_cpu_s_per_million_events"`
	FloorCPUS               float64 `json:"floor_cpu_s"`
	BenchCPUS               float64 `json:"bench_cpu_s"`
	PeakRSSMB               float64 `json:"peak_rss_mb"`
	// RSS: walrelay's VmRSS (and RssAnon) every 250 ms over the phase;
	// SteadyRSSMB (SteadyAnonMB) the median.
	RSS          []rig.RSSPoint `json:"rss,omitempty"`
	SteadyRSSMB  float64        `json:"steady_rss_mb,omitempty"`
	SteadyAnonMB float64        `json:"steady_rss_anon_mb,omitempty"`
	BusyShare    float64        `json:"machine_busy_share"`
	Load         string         `json:"loadavg_after"`
	Error        string         `json:"error,omitempty"`
}
