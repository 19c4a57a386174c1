package store

import (
	"io"
	"time"
)

// Backend is the whole store as the server uses it: every method a domain
// package's store interface may ask for. store/boltstore and store/postgres
// both answer it (each asserts so), and the server and its tests hold a
// Backend, so either backend runs the same product. A domain package still
// declares the narrow interface of what it calls (sms.Store, ...).
type Backend interface {
	AddOptOut(companyID uint64, phone string, now time.Time) (o OptOut, created bool, err error)
	AgentHandOut(companyID, deviceID, messageID uint64) (bool, error)
	AgentMessages(companyID, numberID uint64, page, limit int) ([]Message, int, error)
	AgentNumber(companyID uint64, channel, publicID string) (AgentNumber, error)
	AgentNumberByRef(companyID, numberID uint64) (AgentNumber, error)
	AgentNumbers(companyID uint64, channel string) ([]AgentNumber, error)
	AgentNumbersSentSince(companyID uint64, channel string, since time.Time) ([]AgentNumber, []int, error)
	AgentNumbersNew(companyID uint64, channel string, addresses []string) (fresh, have int, err error)
	AgentPending(companyID, deviceID, numberID, after uint64, limit int) ([]Message, error)
	AgentRelease(companyID, deviceID uint64, held []string) ([]AgentNumber, error)
	AgentSendTimes(companyID, numberID uint64, since time.Time) ([]time.Time, error)
	AgentSendsSince(companyID, numberID uint64, since time.Time) (int, error)
	AllPools() ([]Pool, error)
	AnnounceAgentNumbers(companyID, deviceID uint64, sets []Announced, now time.Time, limit int) ([]AgentNumber, error)
	AnnounceNumbers(companyID, deviceID uint64, channel string, addresses []string, now time.Time, limit int) ([]AgentNumber, error)
	AppendCompanyMail(m *Mail, lim MailLimits) error
	AppendMail(m *Mail) error
	ApplyProviderEvent(eventID string, companyID uint64, customer string, created int64, ordered bool, now time.Time, fn func(sub *Subscription, stale bool) bool) (applied bool, err error)
	Cancel(companyID uint64, uuid string, now time.Time) (Message, error)
	CarrierFailing(companyID uint64, now time.Time) (map[uint64][]string, error)
	Close() error
	Company(id uint64) (Company, error)
	CompanyByAPIKeyHash(hash []byte) (Company, error)
	CompanyByCustomer(customerID string) (companyID uint64, found bool, err error)
	CompanyDevice(companyID uint64, fingerprint string) (Device, error)
	CompanyDevices(companyID uint64) ([]Device, error)
	CompanyIDs() ([]uint64, error)
	GoneCompanies(ids []uint64) ([]uint64, error)
	CompanyMessagesAfter(companyID, after uint64, limit int) (msgs []Message, next uint64, done bool, err error)
	CompanySIMCaps(companyID uint64) (map[uint64]map[string]SIMCaps, error)
	CompanyUsers(companyID uint64) ([]User, error)
	ConsoleSession(hash []byte) (ConsoleSession, error)
	ConsumeOneTimeToken(hash []byte, kinds []string, now time.Time, revokeSessions bool, fn func(*User) error) (User, error)
	Conversations(companyID uint64, device string, limit int) ([]Conversation, error)
	ConversationsAfter(companyID, deviceID uint64, after string, limit int) ([]Conversation, error)
	CopyMedia(w io.Writer, id string, off, n int64) (int64, error)
	CreateCompany(c *Company, admin *User) error
	CreateUser(u *User) error
	DailyStorageBudget() int64
	DashboardSummary(companyID uint64, from, to time.Time, limit int) (Summary, error)
	DeleteConsoleSession(hash []byte) error
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (Device, error)
	DeletePool(companyID, id uint64) (Pool, error)
	DeleteUser(id uint64) error
	Device(fingerprint string) (Device, error)
	DeviceCompany(companyID, deviceID uint64) (Company, error)
	DeviceByTokenHash(hash []byte) (Device, error)
	DeviceFailures(companyID, deviceID uint64) ([]DeviceFailure, error)
	DeviceSummaries(companyID uint64, deviceIDs []uint64) (map[uint64]DeviceSummary, error)
	DevicesReportedOnline() ([]Device, error)
	ClaimMail(id uint64) (Mail, bool, error)
	ClaimWebhookDeliveries(now time.Time, limit int, skip DueSkip) ([]WebhookDue, time.Time, error)
	DueWebhookDeliveries(now time.Time, limit int, skip DueSkip) ([]WebhookDue, time.Time, error)
	Enqueue(m *Message, idemKey IdempotencyKey, now func() time.Time, check DeviceCheck, answer func(Message) (int, []byte)) (Message, *Idempotent, error)
	EnqueueAgent(m *Message, idemKey IdempotencyKey, now func() time.Time, vet SendVet, answer func(Message) (int, []byte)) (Message, *Idempotent, error)
	EnqueueBulk(ms []Message, idemKey IdempotencyKey, now func() time.Time, check DeviceCheck, answer func([]Message) (int, []byte)) ([]Message, *Idempotent, error)
	ExpireQueued(now time.Time, limit int) ([]Message, error)
	Failover(in FailoverInput, check DeviceCheck, now time.Time) (moved []Message, next uint64, err error)
	Generation() (uint64, error)
	History(companyID uint64, device, phone string, page, limit int) ([]Message, int, error)
	ImportMessages(msgs []Message) error
	InboundList(q InboundQuery) ([]Message, error)
	InviteUser(u *User, now time.Time) (heldElsewhere bool, err error)
	LastMessageID() (uint64, error)
	MailOutboxSize(companyID uint64) (pending int, bytes int64, err error)
	Mails(pendingOnly bool) ([]Mail, error)
	MediaByID(companyID uint64, id string) (Media, error)
	MediaByKey(companyID, deviceID uint64, key string) (Media, error)
	MessageByUUID(companyID uint64, uuid string) (Message, error)
	MessageSequence() (uint64, error)
	NextDue() (at time.Time, ok bool, err error)
	OptOuts(companyID uint64, after string, limit int) ([]OptOut, error)
	OptedOut(companyID uint64, phone string) (bool, error)
	Pairing(hash []byte) (Pairing, error)
	Pending(companyID, deviceID uint64, after uint64, limit int, now time.Time, moved func([]Message)) ([]Message, error)
	Pool(companyID, id uint64) (Pool, error)
	Pools(companyID uint64) ([]Pool, error)
	ProvisionDevices(devs []Device) error
	PruneAbandonedSignups(cutoff, now time.Time, after uint64, limit int) (removed int, last uint64, err error)
	PruneAgentSends(cutoff time.Time) (int, error)
	PruneBillingEvents(cutoff time.Time) (int, error)
	PruneConsoleSessions(idleCutoff, now time.Time) (int, error)
	PruneIdempotency(cutoff time.Time) (int, error)
	PruneMail(doneCutoff, unsentCutoff time.Time) (done int, unsent []Mail, err error)
	PruneMedia(cutoff time.Time, limit int) (int, error)
	PrunePairings(cutoff time.Time) (int, error)
	PruneSIMCounts(now time.Time) (int, error)
	PruneSticky(cutoff time.Time) (int, error)
	PruneStorageCounters(cutoff time.Time) (int, error)
	PruneTokenFamilies() (int, error)
	PruneTokens(cutoff time.Time) (int, error)
	PruneWebhookAttempts(cutoff time.Time, keep int) (int, error)
	PutConsoleSession(hash []byte, sess ConsoleSession) error
	PutMedia(m Media, src io.Reader, now time.Time) (Media, bool, error)
	PutOneTimeToken(hash []byte, t OneTimeToken) error
	PutPairing(hash []byte, p Pairing, now time.Time) error
	PutPool(companyID, id uint64, now time.Time, edit func(cur Pool) (PoolInput, error)) (Pool, error)
	QueueDepth(companyID, deviceID uint64) (int, error)
	Ready() error
	RecordWebhookAttempt(id uint64, keep int, decide func(d WebhookDelivery, e *WebhookEntry) WebhookAttempt) (WebhookAttempt, error)
	RecordWebhookAttemptLater(id uint64, keep int, decide func(d WebhookDelivery, e *WebhookEntry) WebhookAttempt) AttemptRecord
	RegisterDevice(pairingHash []byte, now time.Time, fingerprint string, build func(p Pairing, old *Device) (Device, error)) (dev Device, replaced bool, sum DeviceSummary, err error)
	ReleaseDue(now time.Time, limit int) ([]Message, error)
	RemoveCompanyStep(companyID uint64, limit int) (CompanyRemoval, error)
	MarkCompanyClosing(companyID uint64, now time.Time, vet RemovalVet) (Company, error)
	ClosingCompanies() ([]uint64, error)
	RemoveOptOut(companyID uint64, phone string) error
	RevokeUserSessions(userID uint64) error
	RotateRefreshToken(oldHash, newHash []byte, newExpiry, now time.Time) (RefreshToken, error)
	RotateSecrets(names []string, reseal Reseal) (replaced []string, resealed int, unopened []Company, err error)
	SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]SIMUsage, error)
	Secret(name string, size int) ([]byte, error)
	SetDeviceEvents(h DeviceEvents)
	SetInboundEvents(h InboundEvents)
	SetPlans(p Plans)
	SetSIMCaps(companyID uint64, fingerprint string, caps map[string]SIMCaps, now time.Time) ([]SIMUsage, error)
	SetStatusEvents(h StatusEvents)
	Snapshot(dir string) (*Snapshot, error)
	StartRefreshFamily(hash []byte, t RefreshToken, now time.Time) error
	Stats(q StatsQuery) (Stats, error)
	StatsDevices(companyID uint64) ([]StatsDevice, error)
	StatsTotals(companyID uint64) (Counts, error)
	StorageUsed(companyID uint64, t time.Time) (int64, error)
	StoreAgentInbound(m *Message, now func() time.Time) (Message, bool, error)
	StoreInbound(m *Message, now func() time.Time) (Message, bool, error)
	Subscription(companyID uint64) (sub Subscription, found bool, err error)
	TouchConsoleSession(hash []byte, at time.Time) error
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (out Message, moved bool, err error)
	TransitionDetail(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) (Message, bool, error)
	TransitionLater(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) Transit
	UpdateAgentNumber(companyID uint64, channel, publicID string, now time.Time, fn func(*AgentNumber) error) (AgentNumber, error)
	UpdateCompany(id uint64, fn func(*Company) error) (Company, error)
	UpdateDevice(companyID uint64, fingerprint string, fn func(*Device) error) (Device, error)
	UpdateDeviceByID(companyID, deviceID uint64, fn func(*Device) error) (Device, error)
	UpdateDeviceWith(companyID, deviceID uint64, fn func(d *Device) ([]DeviceEvent, error)) (Device, error)
	UpdateMail(id uint64, fn func(*Mail)) (Mail, error)
	UpdateSubscription(companyID uint64, fn func(*Subscription) error) (Subscription, error)
	UpdateUser(id uint64, fn func(*User) error) (User, error)
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*WebhookSet) error) (WebhookSet, error)
	Usage(companyID uint64, periodStart time.Time) (messages int64, devices int, err error)
	User(id uint64) (User, error)
	UserByEmail(email string) (User, error)
	Version() (uint64, error)
	WebhookAttempts(companyID, webhookID uint64, limit int) ([]WebhookAttempt, error)
	WebhookJob(id uint64) (WebhookJob, error)
	WebhookOutboxSize(companyID uint64) (deliveries int, bytes int64, err error)
	WebhookSet(companyID uint64) (WebhookSet, error)
}
