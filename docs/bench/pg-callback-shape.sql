-- A runtime callback's transaction shape on PostgreSQL (BENCHMARKS.md):
-- the runtime credential read, then lock the work, look up the callback ID,
-- insert the callback and update the work.
\set aid random(1, 500000)
\set bid random(1, 5)
\set tid random(1, 50)
\set delta random(-5000, 5000)
SELECT tbalance FROM pgbench_tellers WHERE tid = :tid;
BEGIN;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid FOR UPDATE;
SELECT bbalance FROM pgbench_branches WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
END;
