-- The nodes of a cluster (contract section 12). Every node on the database
-- writes its row at start and beats it every few seconds (NodeBeat); a node
-- is live while its last beat is recent. Times are the database's clock, so
-- the nodes' clocks need not agree.
CREATE TABLE cluster_nodes (
	name       text PRIMARY KEY,
	started_at timestamptz NOT NULL,
	seen_at    timestamptz NOT NULL,
	-- bus says whether the node has a bus (--nats-url): two live nodes
	-- need one each, or neither would hear the other's signals.
	bus        boolean NOT NULL,
	-- instance tells a node's restart (a new instance under the same name)
	-- from a second process claiming a live node's name.
	instance   text NOT NULL
);

-- One link per device across the cluster: registering a link takes the
-- device's next epoch; a link whose epoch is no longer the newest is fenced
-- out (closed with 4009 by the node that holds it).
CREATE TABLE device_links (
	device_id bigint PRIMARY KEY,
	epoch     bigint NOT NULL,
	node      text NOT NULL,
	linked_at timestamptz NOT NULL,
	-- ended_at is set when the link of this epoch ended; NULL while it lives
	-- (or while its node is down without having said so).
	ended_at  timestamptz
);
CREATE INDEX device_links_node ON device_links (node) WHERE ended_at IS NULL;
