// Package postgres is the store on PostgreSQL (15 or later), for several
// nodes sharing one database (docs/cluster.md). It keeps the records of
// package store with the same behaviour as store/boltstore, behind the same
// methods, so every domain package's store interface is met by either; the
// suites of store/conformance hold both to it.
//
// # Conventions
//
// Tables. Each table keeps its record whole in a jsonb column `rec` (the
// record's JSON, as package store declares it) beside the columns that key
// it, index it or guard a rule; both are written from the same record, so
// they never disagree. Ids are bigint identity columns; a record that
// carries its id takes it first (nextID) so that `rec` holds it from its
// first write (a send's message takes it inside its INSERT, which sets the
// id in rec too: queueNewSend). Ids and counters are uint64 in Go and
// bigint here (id()).
// The schema is in migrations/NNNN_name.sql, applied in order at Open under
// an advisory lock; a migration is never edited once released, only added
// to.
//
// Transactions. Every method is one transaction: write (READ COMMITTED)
// or read (a REPEATABLE READ snapshot, read only). The closure
// may run more than once (a serialization failure, a deadlock, errAgain), so
// it only sets what it returns from scratch and calls nothing outside the
// store. What must follow the commit (an event builder's Committed) is put
// off with txn.OnCommit.
//
// A transaction (txn.go) takes a connection of the pool and sends nothing
// until its first statement, which carries the BEGIN (with the
// transaction's isolation level and access mode) in the same pgx.Batch and
// round trip: a BEGIN inside a batch makes the batch's implicit
// transaction an ordinary one that outlives its Sync
// (TestBeginInBatchOutlivesSync). A lone statement (exec, row, query) goes
// as a batch of two, whose Row (when scanned) or Rows (at their end or
// Close) read the batch to its end; a batch (sendBatch) gets the BEGIN
// queued first; COPY, which no batch carries, sends BEGIN alone first.
// The transaction reads the first batch to its end before it commits or
// rolls back, whatever its closure read of it. A transaction that sent
// nothing sends no COMMIT either. A failed statement aborts the
// transaction even where the closure ignored its error: PostgreSQL answers
// its COMMIT with ROLLBACK, which pgx.Tx.Commit turns into
// pgx.ErrTxCommitRollback, so it fails. Whatever was not committed is
// rolled back, also when the closure panics; a ROLLBACK that cannot be
// sent (the store closed, the connection broken) closes the connection, so
// none goes back to the pool inside a transaction (pgxpool, which destroys
// a connection released busy or not idle, is the last guard). A connection
// broken under the first batch is store.ErrUnavailable, as a failed BEGIN
// was.
//
// Each rule a method keeps holds inside its transaction by one of:
//   - a row lock on the row that guards it, taken before the check
//     (SELECT ... FOR UPDATE): the company's row for rules that count a
//     company's rows (devices against the plan, the last admin), the
//     device's row for its queue and its SIMs' caps, a number's row for the
//     governor;
//   - a unique constraint (e-mail addresses, API key hashes, idempotency
//     keys, single-use codes and tokens, a phone's inbound client ids); its
//     violation is store.ErrConflict (mapErr) unless the method turns it
//     into its own answer;
//   - one conditional statement (UPDATE ... WHERE, INSERT ... ON CONFLICT).
//
// Never a check in one transaction and the write in another.
//
// The one exception to one transaction a method is a phone's reports:
// TransitionLater queues the change for a worker that makes what queued
// meanwhile in one transaction (reports.go), so a link reads on while its
// reports wait for a commit, and a backlog's acks and reports share
// commits. A device's reports keep their order (one worker a device), and
// a change that fails writes nothing and fails as it would have alone.
// The batch shares its statements too: one round trip reads and locks its
// messages (in id order) and what its changes look at, the changes are
// worked out in Go in order, and one round trip writes every table's rows
// in one statement, the counters' increments summed per row first
// (reports_plan.go): a batch costs the same statements whatever its size.
// The workers' batches mix companies and share their counters' rows, so
// each statement lists its rows sorted by key, never in a map's order: all
// batches lock in one order and never deadlock on each other
// (reports_write.go, TestReportPlanLocksInOrder,
// TestReportBatchesTrimInOneOrder). A feed's trim (the activity, a
// device's failures) sees the lines committed before its statement, as a
// lone change's does: batches that commit together may each leave the
// others' newest lines past the feed's length until the next trim; the
// feeds are read newest first and limited, so no reader sees more.
//
// Counters. A counter every send of a company touches is split into shards
// (storage_usage, plan_usage, stats_days, webhook_outboxes: 8 rows per
// key), summed on read, so a company's concurrent sends do not queue on one
// row. A transaction adds to one shard of all of them, chosen at random
// at its first add (txn.shard), so two transactions meet on all their
// counters' rows or on none; where they meet, they lock them in one order,
// the order of a batch of reports' write: the daily counts (stats_days),
// the activity feed's trim, a device's last failures, the deliveries
// log's trim (an attempt's line too, before it takes its delivery off the
// outbox: TestAttemptLogsBeforeTheOutbox), the webhook outbox, and the
// day's storage use last of all
// (txn.chargeStorage: a write's charges are added up and written as its
// last statement, at its commit or at the end of its last batch, whatever
// point each charge was made at; the budget's check reads the day's use
// there, unlocked). Charged where each write reached it, a received
// message held its charge while it waited for the feed's oldest line,
// which a batch of reports held while it waited for its charge, and so on
// for a STOP and the API's opt-out, an upload and a send to its device, a
// bulk send and a single send (TestChargesLockLast).
// Where a limit must be exact (a plan that caps messages, a SIM's caps) the
// write locks the row that guards it and the company's sends serialise
// there; where it need not be (the daily storage budget guards the disk,
// it is not a price; the webhook outbox's bounds, webhook_outboxes, guard
// it too), the check reads the sum unlocked and may be overshot by the
// writes in flight at once, a lone write's as a batch of reports' (whose
// changes each see the outbox as the batch's earlier ones left it). Either
// way the counters themselves stay exact: every write adds what it stored
// (TestReportBatchesInterleaved, conformance's SendBudget/Race).
//
// The device queue. A queued message's queue_place is drawn from one
// sequence (queue_places) under the device row's lock (takePlaces), so one
// device's places rise in the order their transactions commit: a link that
// read its queue up to a place never passes a job committed after its read,
// which ids (a sequence, handed out before commit) would not promise. As
// the places are one sequence's, no two jobs share one, and its last value
// (MessageSequence) is above every place handed out, on every device.
//
// # The send path
//
// The key columns of an outbound message, as every write that moves one
// sets them from its record (sends.go: sendColumns, updateSend):
//   - status is the record's;
//   - queue_place is its place (the record's QueueSeq, from takePlaces)
//     while it waits in its device's queue: queued and not held; NULL
//     otherwise (scheduled, held, sending and on). So on this backend a
//     queued message's QueueSeq is always set and QueuePlace is the place,
//     never the id;
//   - due_at is send_at while scheduled and held_until while held (queued
//     outside its window); NULL otherwise. NextDue reads its minimum,
//     ReleaseDue the rows due;
//   - expires_at is the record's ExpiresAt while queued (held or not),
//     NULL otherwise; ExpireQueued ends the queued rows whose expires_at
//     is before now.
//
// Any write that moves a message off queued or scheduled (a report, a
// cancel, an expiry, a deletion of its device) writes the record with
// updateSend or sets queue_place and due_at NULL itself.
//
// What a send checks of its company that no lock guards (its plan's
// limits, the opt-out list, the day's storage use) is read in one
// statement before it locks its device (readSendFacts). A single send
// (Enqueue, enqueue.go) costs three round trips and nine statements, BEGIN
// and COMMIT included: one pgx.Batch, BEGIN first, claims its idempotency
// key, reads those facts, locks its device and reads its SIM's caps and
// counts under the lock; its checks then run in Go in the order they
// always did; one batch writes the plan's usage (locking its row and reading the period's
// use back in the same statement when the plan caps messages: over the
// plan is then the batch's error and the rollback undoes the rest), the
// SIM's counts, the message, whose id and queue place its INSERT takes,
// and the storage use, last. A key's answer is one more round trip, a send through
// a pool its lookups. TestSendCost and BenchmarkEnqueue count them. A bulk
// send reads its recipients' opt-outs with those facts, locks its plan row
// alone (lockPlanUsage), takes its ids in one statement and writes its
// rows in one (insertOutbound), and the places of all its queued messages
// in one more (takePlaces), its devices locked already as takePlaces needs:
// a request costs the same whatever its size (TestBulkStatements).
//
// Idempotency keys: a send claims its key's row (idempotency) first, with
// INSERT ... ON CONFLICT DO NOTHING and then the row's lock, so a retry
// racing the send waits for its commit and replays its answer; a refused
// send rolls its claim back and keeps no answer. (A single send claims in
// its read batch, so when the key's row was there already it takes the
// row's lock after its device's; a deadlock this order may meet with
// another writer is broken by the database and run again, write.) Opt-outs are the
// opt_outs table, read by optOutRefusal inside each send (and by whatever
// else must refuse or fail an SMS to a listed number).
//
// ReleaseDue and ExpireQueued lock the rows they take with SKIP LOCKED:
// nodes sweeping at once take disjoint rows, so each message is released
// or expired once. A sweep costs a few round trips whatever it moves
// (sweeps.go): one takes its rows, one locks their devices (a release's
// only) and reads their opt-outs and webhook sets, one takes the released
// jobs' queue places (takePlaces), and one writes its moves through a
// report batch's plan, a statement a table. The devices are locked in one
// statement in id order (SELECT ... ORDER BY id FOR UPDATE), never in due
// order, and every shared row the write touches is listed by key, as a
// report batch lists it: two nodes sweeping at once on the same devices
// never wait on each other in a circle (TestSweepsLockDevicesInOrder).
//
// Lock order: messages, then pools, then pool member turns, then devices; rows
// of one kind in id order, several devices in one statement (a sweep
// takes its messages in due order, but skips locked ones rather than
// wait). A report batch locks its messages (its devices it reads
// unlocked); a sweep its messages, then their devices; a failover its
// jobs (TestFailoverLocksJobsInIDOrder), then their pools' member turn
// rows, then all their members' devices (TestFailoverTakesPoolTurnsFirst); an
// edit or deletion of a pool its row, then its member turns, then (an edit) a
// share lock on its members' devices, a new pool's before its company's
// row, as a registration and a deletion take a device's and then its
// company's (TestPoolMemberRacesItsDeviceDeletion), and an agent's hello
// that announces numbers its device's, then its company's (KEY SHARE
// with its closing mark, after a savepoint it goes back to before it
// takes the row FOR UPDATE to count a new number,
// TestAnnouncementsOfNewNumbersTakeNoDeadlock), then the numbers'
// (AnnounceAgentNumbers: the WhatsApp numbers', then the iMessage
// handles', in one transaction); a device deletion
// its device's unfinished jobs and the pools it leaves, then the device,
// then those again with any a send queued or an edit added in between
// (TestDeviceDeletionLocksAfterItsJobs, TestDeviceDeletionLocksPoolsFirst),
// then its company's row, then the counters, its jobs' status events and
// its activity line in a report batch's order, its device's failures after
// them (TestDeviceDeletionWritesInBatchOrder). A write that locks several
// messages takes them in one statement, in id order, before anything else
// (a phone's read of its queue that fails or holds jobs: lockMessages,
// TestDispatchLocksJobsFirst). The counters come after all of these.
// A send locks no message or pool row that exists already: a send by
// name locks its device; a single send through a pool the turn row of one
// member (FOR UPDATE SKIP LOCKED: it passes over those other sends hold)
// and then that member's device, letting both go (ROLLBACK TO SAVEPOINT)
// before it looks at another, so it waits for a device holding no other
// and for a member's row holding nothing; a bulk send through a pool the
// turn rows of all its members and then all their devices in id order,
// before it looks at any (route.go, TestPoolSendsLockDevicesInOrder,
// TestPoolSendsCommitSideBySide). So none of them waits on another in a
// circle over these rows.
// A company's removal (RemoveCompanyStep, an admin command) is the one
// writer that does not keep it: each of its steps locks the company's
// devices, in id order, then its row (the API key's change), then its
// users, in id order (a sign-in that stores a session holds its user KEY
// SHARE and commits first; a spent e-mailed link locks its token before
// its user, so it may meet the removal in a circle too), then the
// company's row FOR NO KEY UPDATE (two nodes' steps of the company take
// turns; no KEY SHARE of a writer waits for it), and then
// deletes its rows table by table, messages among them; a writer that
// holds a message of the company and waits for its device may meet it in
// a circle, and the database's deadlock check ends one of the two, which
// write runs again. The company's devices and credentials go with the
// first step, so after it no new writer of the company's messages starts
// (TestConformance's CompanyRemoval/LinkedPhoneAfter).
//
// # Received messages
//
// A received SMS (StoreInbound, a phone's inbound frame) costs three round
// trips and, with three webhook entries, 12 statements, BEGIN and COMMIT
// included (inbound.go, TestInboundCost): one pgx.Batch, BEGIN first,
// reads in one statement its device (gone while its company is closing:
// the company's row is taken KEY SHARE there, the transaction's first
// lock, so a company's mark, MarkCompanyClosing, waits for a message that
// read it open, and one that met the mark reads it closing,
// TestInboundMeetsAClosingMark), an earlier message of its client id,
// the day's storage use and, when these let it be stored, its id (taken
// from the sequence inside that statement, so a repeat or a refusal takes
// none), and with it its company's webhook set and outbox size
// (queueWebhookFacts) and, for a stop or start keyword, its company's
// setting; its checks then run in Go in the order they always did; one
// batch writes the message, its daily count, its activity line and the
// feed's trim, its sender's opt-out (a keyword), its event's body, its
// deliveries (one INSERT from unnest, their ids taken inside it) and the
// outbox's counters (over the outbox's bounds, the deliveries log's
// failed lines in one INSERT and the log's trim instead), and the day's
// storage use, last: the order of a batch of reports' write. A keyword's new opt-out is charged once that batch
// says it is new, and the charges are then written by the commit, a round
// trip more. An agent's received message (StoreAgentInbound) reads its
// number with its device (its company's row KEY SHARE, as above) and
// writes in one batch too; it takes its id in
// a round trip of its own, as its files are taken for it before its
// insert. Any other lone event (a status change's, a device's) reads the
// set and the outbox in one statement and writes in one batch
// (addWebhookEvent): two round trips.
//
// # Resources
//
// PostgreSQL answers that it ran out of a resource with SQLSTATE class 53;
// each such error aborts the transaction, so nothing was written, and is a
// state of the database server rather than of the request (exhausted,
// tx.go). 53100 disk_full (a table or index could not grow its file) is
// store.ErrDiskFull, which the API answers as it answers the embedded
// store's full disk: 503, the disk is full, nothing was done. 53000
// insufficient_resources, 53200 out_of_memory and 53300
// too_many_connections (max_connections taken, by this pool and whatever
// else connects; it comes at connect, inside pgconn.ConnectError) are
// store.ErrUnavailable, as a database out of reach is: a 500 would say the
// request itself failed and is worth no retry, while the same call
// succeeds once the server has memory, connections or room again, and
// the client's retry after Retry-After is the right one. 53400
// configuration_limit_exceeded (temp_file_limit) stays an error as it
// is: the statement is over the limit again when run again. None of
// them is run again inside the store (retryable: serialization failures
// and deadlocks only), nor split as a report batch is (reports.go): each
// try would fail as the first did, and keep a connection busy doing it.
// Unlike the embedded store, this store keeps no full-disk state and
// Ready does not fail on it: Ready asks whether the database answers, and
// it does; its disk is shared by every node, so failing them all would
// take the whole service out of its balancer (docs/operations.md,
// "PostgreSQL on a full disk"). One function classifies (classified,
// tx.go): a transaction's error through failed, and the statements run
// outside the transaction helper call it themselves (the rate-limit
// windows, the stream leases' drop, give-back and renewal, the import's
// own transaction: TestWindowsErrorsClassified,
// TestStreamLeasesErrorsClassified, TestLoadErrorsClassified), and so do
// the reads outside one (the analytics' generation, the schema version, a
// file's chunks: closed, stats.go; TestReadsOutsideTransactionsUnavailable).
// This store has no logger: the API logs the
// requests it refuses for either error, spaced (httpapi's storeDiskFull
// and storeUnavailable).
//
// # Versus the embedded store
//
// The budget may be overshot by concurrent writes of one company (above).
// A company's sends serialise on its plan_usage row only while its plan caps
// its messages, and sends to one device on the device's row.
// Idempotency answers kept by bbolt before keys had routes (company and
// key alone) have no equivalent here: every key is a route's.
// PruneStorageCounters says how many company days it dropped, as bbolt
// does, not how many shard rows. ReleaseDue and ExpireQueued skip the rows
// another node's sweep holds rather than wait for them.
// The analytics (stats.go): Generation moves with every transaction the
// database server ends, this store's or not, so the API's kept answers are
// dropped more often, never served stale; the counters' day sums are kept
// by triggers on stats_days, so a copy writes the counters alone.
// What a list shows of each of its rows is read for the page at once, in
// one statement, never one transaction per row: DeviceSummaries (queue
// depths and failures) and LinkedSinceMany (presence on other nodes);
// httpapi's TestDeviceListStatementsDoNotGrowWithDevices counts them.
//
// # What only a cluster uses
//
// The API's rate-limit windows (windows.go) and the console's stream leases
// (streams.go) are UNLOGGED tables: rows that live a minute or a quarter of
// an hour, written on every request or stream, are not worth a WAL record
// each, and losing them in a crash of the database server costs at most one
// fresh window or a minute of uncounted streams. A window is one
// INSERT ... ON CONFLICT DO UPDATE; a stream's lease is taken under its
// company's row lock. Both are timed by the database's clock.
//
// The registry of nodes (cluster_nodes, cluster.go) keeps each node's
// name, bus, instance and build (version, migration 0015): every node reads
// the live nodes' builds at its beats and warns of builds other than its
// own (docs/cluster.md, Upgrading the nodes). A migration itself refuses to
// run while nodes beat (migrate.go), and a node refuses to join the
// registry on a schema migrated since it opened the store (RegisterNode,
// under the migration's lock), so only builds on one schema meet.
package postgres
