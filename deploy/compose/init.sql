-- docker-compose.yml's PostgreSQL runs this once, as POSTGRES_USER in
-- POSTGRES_DB, when it initialises an empty data directory.
--
-- The outbox table is Debezium's (id, aggregatetype, aggregateid, type,
-- payload), column for column the one the end-to-end tests use; test/compose
-- checks that. walrelay creates the replication slot on start (--create).

CREATE TABLE outbox (
  id            uuid PRIMARY KEY,
  aggregatetype text NOT NULL,
  aggregateid   text NOT NULL,
  type          text NOT NULL,
  payload       jsonb
);

-- A business table: written in the same transaction as the outbox row, never
-- published itself.
CREATE TABLE orders (
  id         bigserial PRIMARY KEY,
  customer   text NOT NULL,
  total      numeric(12, 2) NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The publication `walrelay run --create` would create. Inserts only: updates
-- and deletes of outbox rows (retention) are not events. Through the root: the
-- rows of a partitioned outbox keep its name (nothing changes for a plain one).
CREATE PUBLICATION walrelay FOR TABLE outbox WITH (publish = 'insert', publish_via_partition_root = true);
