\set aid random(1, 500000)
\set bid random(1, 5)
\set tid random(1, 50)
\set delta random(-5000, 5000)
\startpipeline
BEGIN;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
\endpipeline
SELECT bbalance FROM pgbench_branches WHERE bid = :bid;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
\startpipeline
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
\endpipeline
