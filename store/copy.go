package store

import (
	"errors"
	"slices"
	"strings"
	"time"
)

// A store copy (simrelay admin copy-store) moves a whole store from one
// backend to another: the source, its server stopped, dumps its records
// kind by kind from one consistent view of it (a Dumper), and the
// destination, empty, loads them in one transaction (a Loader), keeping
// every id. Each side counts its records per kind, so the copy can show
// both counts and fail where they differ.
//
// The interchange is one typed record per kind (the Copy* types below),
// each what the store's methods answer with plus the little a backend keeps
// beside it (a token's hash, whether a user holds its address). Indexes a
// backend derives from its records (conversations, the counters' sums, a
// company's users) are not copied: the destination builds its own.

// Kind names one kind of record a copy moves, as the copy's report prints it.
type Kind string

// The kinds, in the order a dump gives them: what a record refers to comes
// before it (a company before its users, a token family before its tokens).
const (
	KindCompanies       Kind = "companies"
	KindUsers           Kind = "users"
	KindDevices         Kind = "devices" // registrations, deleted ones included
	KindPairings        Kind = "pairings"
	KindSubscriptions   Kind = "subscriptions"
	KindPlanUsage       Kind = "plan usage"    // messages queued per company and plan period
	KindStorageUsage    Kind = "storage usage" // bytes added per company and UTC day
	KindActivity        Kind = "activity"
	KindStats           Kind = "message counters" // per company, day, channel, device and user
	KindTokenFamilies   Kind = "token families"
	KindRefreshTokens   Kind = "refresh tokens"
	KindOneTimeTokens   Kind = "one-time tokens"
	KindConsoleSessions Kind = "console sessions"
	KindSecrets         Kind = "secrets"

	KindMessages          Kind = "messages" // SMS and MMS, either way (KindAgentMessages: the agents' channels)
	KindIdempotency       Kind = "idempotency answers"
	KindOptOuts           Kind = "opt-outs"
	KindDeviceFailures    Kind = "device failures"
	KindPools             Kind = "pools"
	KindStickyEntries     Kind = "pool sticky entries"
	KindSIMCaps           Kind = "SIM caps"
	KindSIMCounts         Kind = "SIM counts"
	KindWebhookSets       Kind = "webhook sets"
	KindWebhookEvents     Kind = "webhook events"
	KindWebhookDeliveries Kind = "webhook deliveries"
	KindWebhookAttempts   Kind = "webhook attempts"
	KindMail              Kind = "mail outbox"
	KindMedia             Kind = "media"
	KindBillingEvents     Kind = "billing events"
	KindAgentNumbers      Kind = "agent numbers"
	KindAgentSends        Kind = "agent sends"
	KindAgentMessages     Kind = "agent messages" // WhatsApp and iMessage, either way
)

// Kinds lists every kind a store holds, in dump order.
var Kinds = []Kind{
	KindCompanies, KindUsers, KindDevices, KindPairings, KindSubscriptions, KindPlanUsage, KindStorageUsage,
	KindActivity, KindStats, KindTokenFamilies, KindRefreshTokens, KindOneTimeTokens, KindConsoleSessions, KindSecrets,
	KindMessages, KindIdempotency, KindOptOuts, KindDeviceFailures, KindPools, KindStickyEntries, KindSIMCaps, KindSIMCounts,
	KindWebhookSets, KindWebhookEvents, KindWebhookDeliveries, KindWebhookAttempts, KindMail, KindMedia,
	KindBillingEvents, KindAgentNumbers, KindAgentSends, KindAgentMessages,
}

// CopyRecord is one record of a copy: one of the Copy* types.
type CopyRecord interface {
	CopyKind() Kind
}

// Dumper is a store that can be read whole for a copy.
type Dumper interface {
	// DumpKinds are the kinds Dump gives.
	DumpKinds() []Kind
	// Dump passes each record of the kinds it gives to put, kind by kind in
	// the order of Kinds, from one consistent view of the store; an error
	// of put ends the dump with it.
	Dump(put func(CopyRecord) error) error
	// CopyCounts counts the store's records of every kind of Kinds, as
	// Dump would give them.
	CopyCounts() (map[Kind]int64, error)
}

// Loader is a store that can be filled by a copy.
type Loader interface {
	// LoadKinds are the kinds Load takes.
	LoadKinds() []Kind
	// Load stores every record dump gives (dump calls put once per record,
	// as Dumper.Dump does), keeping their ids, in one transaction: a
	// failure leaves the store as it was. A store that already holds a
	// company is refused with ErrNotEmpty, a record of a kind it does not
	// take with an error naming it.
	Load(dump func(put func(CopyRecord) error) error) error
	// CopyCounts counts the store's records per kind, as a dump of it would
	// give them.
	CopyCounts() (map[Kind]int64, error)
}

// ErrNotEmpty refuses a copy into a store that already holds data.
var ErrNotEmpty = errors.New("store: the destination already holds a company: a copy goes into an empty store only")

// Uncopied lists, in Kinds' order, the kinds of which the source holds
// records (counts) that src cannot dump or dst cannot load: a copy that
// went ahead would leave them behind.
func Uncopied(counts map[Kind]int64, src Dumper, dst Loader) []Kind {
	var out []Kind
	for _, k := range Kinds {
		if counts[k] > 0 && (!slices.Contains(src.DumpKinds(), k) || !slices.Contains(dst.LoadKinds(), k)) {
			out = append(out, k)
		}
	}
	return out
}

// KindList is kinds as a sentence's list: "a, b and c".
func KindList(kinds []Kind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// CopyCompany is a company (KindCompanies).
type CopyCompany struct{ Company Company }

// CopyUser is a user (KindUsers). Held says whether the user holds its
// address on the whole server (a pending invitee does not).
type CopyUser struct {
	User User
	Held bool
}

// CopyDevice is a device registration (KindDevices). A deleted one keeps
// only what the source knows of it (id, company, fingerprint, name):
// enough for its messages and counters to name it.
type CopyDevice struct {
	Device  Device
	Deleted bool
}

// CopyPairing is a pairing code by the hash of the code (KindPairings).
type CopyPairing struct {
	Hash    []byte
	Pairing Pairing
}

// CopySubscription is a company's subscription (KindSubscriptions).
type CopySubscription struct{ Subscription Subscription }

// CopyPlanUsage is how many messages a company queued in a plan period
// (KindPlanUsage).
type CopyPlanUsage struct {
	CompanyID   uint64
	PeriodStart time.Time
	Used        int64
}

// CopyStorageUsage is how many bytes a company added on a UTC day
// (KindStorageUsage; Day as StatsDay numbers it).
type CopyStorageUsage struct {
	CompanyID uint64
	Day       uint32
	Used      int64
}

// CopyActivity is one event of a company's recent activity
// (KindActivity); a dump gives a company's events oldest first.
type CopyActivity struct {
	CompanyID uint64
	Activity  Activity
}

// CopyStats is the message counters of one company, UTC day (StatsDay),
// channel (ChannelByte), device registration and user (KindStats).
type CopyStats struct {
	CompanyID uint64
	Day       uint32
	Channel   byte
	DeviceID  uint64
	UserID    uint64
	Counts    Counts
}

// CopyTokenFamily is a refresh-token family (KindTokenFamilies).
type CopyTokenFamily struct {
	Family string
	Token  TokenFamily
}

// CopyRefreshToken is a refresh token by the hash of its value
// (KindRefreshTokens).
type CopyRefreshToken struct {
	Hash  []byte
	Token RefreshToken
}

// CopyOneTimeToken is an e-mailed token by the hash of its value
// (KindOneTimeTokens).
type CopyOneTimeToken struct {
	Hash  []byte
	Token OneTimeToken
}

// CopyConsoleSession is a signed-in browser by the hash of its id
// (KindConsoleSessions).
type CopyConsoleSession struct {
	Hash    []byte
	Session ConsoleSession
}

// CopySecret is one of the server's secrets (KindSecrets).
type CopySecret struct {
	Name  string
	Value []byte
}

// CopyMessage is a message, either way: KindMessages, or
// KindAgentMessages for the agents' channels (WhatsApp, iMessage).
type CopyMessage struct{ Message Message }

// CopyIdempotency is the answer a company's Idempotency-Key got on a route
// (KindIdempotency). An answer kept before keys had routes has Route "".
type CopyIdempotency struct {
	CompanyID uint64
	Route     string
	Key       string
	Answer    Idempotent
}

// CopyOptOut is a number on a company's opt-out list (KindOptOuts).
type CopyOptOut struct {
	CompanyID uint64
	OptOut    OptOut
}

// CopyDeviceFailure is one of a device registration's last failed or
// expired sends (KindDeviceFailures); a dump gives a device's oldest first.
type CopyDeviceFailure struct {
	CompanyID uint64
	DeviceID  uint64
	Failure   DeviceFailure
}

// CopyPool is a sender pool with its round-robin turn (KindPools).
type CopyPool struct {
	Pool Pool
	Turn uint64
}

// CopySticky is the member a sticky pool last sent to a recipient from
// (KindStickyEntries).
type CopySticky struct {
	CompanyID uint64
	PoolID    uint64
	Phone     string
	DeviceID  uint64
	SIMSlot   string
	WrittenAt time.Time
}

// CopySIMCaps is one SIM's caps (KindSIMCaps).
type CopySIMCaps struct {
	CompanyID uint64
	DeviceID  uint64
	Slot      string
	Caps      SIMCaps
}

// SIM counts (KindSIMCounts): a SIM's sends per UTC day and month and
// distinct recipients per day (CopySIMUsage), those recipients while its
// caps count them (CopySIMRecipient), and its streak of carrier failures
// (CopySIMStreak).

// CopySIMUsage is one of a SIM's counts: Kind 'd' (sends of the UTC day
// Period, yyyymmdd), 'm' (of the month, yyyymm) or 'r' (recipients of the
// day).
type CopySIMUsage struct {
	CompanyID uint64
	DeviceID  uint64
	Slot      string
	Kind      byte
	Period    int32
	N         int64
}

// CopySIMRecipient is a recipient a SIM sent to on a UTC day (yyyymmdd).
type CopySIMRecipient struct {
	CompanyID uint64
	DeviceID  uint64
	Slot      string
	Day       int32
	Phone     string
}

// CopySIMStreak is a SIM's streak of sends failed with carrier errors.
type CopySIMStreak struct {
	CompanyID uint64
	DeviceID  uint64
	Slot      string
	N         int64
	LastAt    time.Time
}

// CopyWebhookSet is a company's webhook entries and signing secret
// (KindWebhookSets).
type CopyWebhookSet struct{ Set WebhookSet }

// CopyWebhookEvent is the body an event's pending deliveries send, stored
// once, with how many of them are pending (KindWebhookEvents).
type CopyWebhookEvent struct {
	ID        string
	CompanyID uint64
	Body      []byte
	Pending   int64
}

// CopyWebhookDelivery is a pending delivery of an event to a webhook entry
// (KindWebhookDeliveries).
type CopyWebhookDelivery struct{ Delivery WebhookDelivery }

// CopyWebhookAttempt is a line of a company's deliveries log
// (KindWebhookAttempts).
type CopyWebhookAttempt struct{ Attempt WebhookAttempt }

// CopyMail is a mail of the outbox (KindMail).
type CopyMail struct{ Mail Mail }

// CopyMedia is an uploaded file's record (KindMedia); its bytes follow it
// as CopyMediaChunks, in order.
type CopyMedia struct{ Media Media }

// CopyMediaChunk is the N-th chunk of a file's bytes (part of KindMedia,
// not counted apart).
type CopyMediaChunk struct {
	MediaID string
	N       uint32
	Data    []byte
}

// CopyBillingEvent is a payment provider's event already applied
// (KindBillingEvents).
type CopyBillingEvent struct {
	ID        string
	AppliedAt time.Time
}

// CopyAgentNumber is a WhatsApp number or iMessage handle of a company
// (KindAgentNumbers).
type CopyAgentNumber struct{ Number AgentNumber }

// CopyAgentSend is a send a number accepted, by time, for its governor
// (KindAgentSends).
type CopyAgentSend struct {
	CompanyID uint64
	NumberID  uint64
	SentAt    time.Time
	MessageID uint64
}

// CopyLastIDs is the highest id the source has handed out for each kind
// that numbers its records, used or since deleted, so that the
// destination never hands one out again. A dump gives it once, first; it
// is not a kind of its own and is not counted.
type CopyLastIDs map[Kind]uint64

func (CopyCompany) CopyKind() Kind         { return KindCompanies }
func (CopyUser) CopyKind() Kind            { return KindUsers }
func (CopyDevice) CopyKind() Kind          { return KindDevices }
func (CopyPairing) CopyKind() Kind         { return KindPairings }
func (CopySubscription) CopyKind() Kind    { return KindSubscriptions }
func (CopyPlanUsage) CopyKind() Kind       { return KindPlanUsage }
func (CopyStorageUsage) CopyKind() Kind    { return KindStorageUsage }
func (CopyActivity) CopyKind() Kind        { return KindActivity }
func (CopyStats) CopyKind() Kind           { return KindStats }
func (CopyTokenFamily) CopyKind() Kind     { return KindTokenFamilies }
func (CopyRefreshToken) CopyKind() Kind    { return KindRefreshTokens }
func (CopyOneTimeToken) CopyKind() Kind    { return KindOneTimeTokens }
func (CopyConsoleSession) CopyKind() Kind  { return KindConsoleSessions }
func (CopySecret) CopyKind() Kind          { return KindSecrets }
func (CopyIdempotency) CopyKind() Kind     { return KindIdempotency }
func (CopyOptOut) CopyKind() Kind          { return KindOptOuts }
func (CopyDeviceFailure) CopyKind() Kind   { return KindDeviceFailures }
func (CopyPool) CopyKind() Kind            { return KindPools }
func (CopySticky) CopyKind() Kind          { return KindStickyEntries }
func (CopySIMCaps) CopyKind() Kind         { return KindSIMCaps }
func (CopySIMUsage) CopyKind() Kind        { return KindSIMCounts }
func (CopySIMRecipient) CopyKind() Kind    { return KindSIMCounts }
func (CopySIMStreak) CopyKind() Kind       { return KindSIMCounts }
func (CopyWebhookSet) CopyKind() Kind      { return KindWebhookSets }
func (CopyWebhookEvent) CopyKind() Kind    { return KindWebhookEvents }
func (CopyWebhookDelivery) CopyKind() Kind { return KindWebhookDeliveries }
func (CopyWebhookAttempt) CopyKind() Kind  { return KindWebhookAttempts }
func (CopyMail) CopyKind() Kind            { return KindMail }
func (CopyMedia) CopyKind() Kind           { return KindMedia }
func (CopyMediaChunk) CopyKind() Kind      { return KindMedia }
func (CopyBillingEvent) CopyKind() Kind    { return KindBillingEvents }
func (CopyAgentNumber) CopyKind() Kind     { return KindAgentNumbers }
func (CopyAgentSend) CopyKind() Kind       { return KindAgentSends }
func (CopyLastIDs) CopyKind() Kind         { return "" }

func (r CopyMessage) CopyKind() Kind {
	if IsAgentChannel(r.Message.Channel) {
		return KindAgentMessages
	}
	return KindMessages
}
