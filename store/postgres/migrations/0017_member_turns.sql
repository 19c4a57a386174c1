-- A pool's round-robin turn as a count per member instead of one row per
-- pool: a send through the pool locks the row of the member it takes
-- (FOR UPDATE SKIP LOCKED), not a row every send through the pool locks,
-- so sends through one pool commit side by side (poolpick.go). taken
-- counts the turns the member had (taken, or passed over as unusable):
-- the turn is the member with the fewest, ties in the pool's order.
CREATE TABLE pool_member_turns (
	pool_id   bigint NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
	member_id bigint NOT NULL,
	taken     bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (pool_id, member_id)
);

-- Every member of every pool gets its row: the members before the one a
-- pool's turn named have had one more turn, so the next send takes that
-- one and the turn goes on round the pool in its order.
INSERT INTO pool_member_turns (pool_id, member_id, taken)
SELECT p.id, (m.value->>'id')::bigint,
	CASE WHEN m.ordinality - 1 < coalesce(t.turn, 0) % greatest(jsonb_array_length(p.rec->'members'), 1) THEN 1 ELSE 0 END
FROM pools p
CROSS JOIN LATERAL jsonb_array_elements(coalesce(p.rec->'members', '[]'::jsonb)) WITH ORDINALITY AS m (value, ordinality)
LEFT JOIN pool_turns t ON t.pool_id = p.id
ON CONFLICT DO NOTHING;

DROP TABLE pool_turns;
