-- A device's conversations by number, across the company's devices: a
-- send through a sticky pool to a number it has no entry for looks for the
-- member whose device talked to the number last, and read through the
-- primary key (company, device, number) that was a probe for each member,
-- 100 for a pool of 100 phones (0.4 ms a send; a bulk of 10,000 to new
-- numbers 4 s, its members locked all along: docs/performance.md, "Sticky
-- sends on PostgreSQL"). Through this index it is one probe, and the
-- messages are read only of the few devices that talked to the number.
-- One more index entry each time a conversation's row is written.
CREATE INDEX conversations_phone ON conversations (company_id, phone, device_id);
