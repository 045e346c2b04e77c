-- An inbound event's transaction shape on PostgreSQL (BENCHMARKS.md): the
-- binding and endpoint read before the transaction (its token, then its
-- endpoint and runtime credential), then one transaction that writes the
-- conversation, the event, the work item and the handoff message.
\set aid random(1, 500000)
\set bid random(1, 5)
\set tid random(1, 50)
\set delta random(-5000, 5000)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT bbalance FROM pgbench_branches WHERE bid = :bid;
SELECT tbalance FROM pgbench_tellers WHERE tid = :tid;
BEGIN;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
