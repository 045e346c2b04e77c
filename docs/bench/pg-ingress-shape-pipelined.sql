-- pg-ingress-shape.sql in two round trips: the reads, then the
-- transaction's four inserts and its commit.
\set aid random(1, 500000)
\set bid random(1, 5)
\set tid random(1, 50)
\set delta random(-5000, 5000)
\startpipeline
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT bbalance FROM pgbench_branches WHERE bid = :bid;
SELECT tbalance FROM pgbench_tellers WHERE tid = :tid;
\endpipeline
\startpipeline
BEGIN;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
\endpipeline
