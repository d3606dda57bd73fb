-- docker-compose.yml's fleet-init (profile fleet) runs this with psql in
-- database app once PostgreSQL is healthy, on every `up`: the two databases
-- of deploy/compose/fleet.yaml's pipelines, each with the outbox of init.sql
-- and its publication. Idempotent: what exists is left as it is.

SELECT 'CREATE DATABASE orders' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'orders')\gexec
SELECT 'CREATE DATABASE billing' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'billing')\gexec

\connect orders
CREATE TABLE IF NOT EXISTS outbox (
  id            uuid PRIMARY KEY,
  aggregatetype text NOT NULL,
  aggregateid   text NOT NULL,
  type          text NOT NULL,
  payload       jsonb
);
SELECT 'CREATE PUBLICATION walrelay FOR TABLE outbox WITH (publish = ''insert'', publish_via_partition_root = true)'
WHERE NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'walrelay')\gexec

\connect billing
CREATE TABLE IF NOT EXISTS outbox (
  id            uuid PRIMARY KEY,
  aggregatetype text NOT NULL,
  aggregateid   text NOT NULL,
  type          text NOT NULL,
  payload       jsonb
);
SELECT 'CREATE PUBLICATION walrelay FOR TABLE outbox WITH (publish = ''insert'', publish_via_partition_root = true)'
WHERE NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'walrelay')\gexec
