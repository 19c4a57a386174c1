-- The build each node runs (its simrelay version), so that every node can
-- tell, at each beat, live nodes that run another build on this schema
-- (docs/cluster.md, Upgrading the nodes). Rows written before this column
-- have none (''): no such node is live, since a migration waits for every
-- node to stop.
ALTER TABLE cluster_nodes ADD COLUMN version text NOT NULL DEFAULT '';
