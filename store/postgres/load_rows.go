package postgres

// The load's rows: each copied record as the table, columns and values it is
// written as.

import (
	"fmt"
	"time"

	"github.com/simrelay/simrelay/store"
)

// agentMessage is a WhatsApp or iMessage message as its row: it waits in
// its number's queue (number_id), not a device's, and an inbound one keeps
// its agent's client id (agent_client), as insertAgentMessage writes them.
func (l *loader) agentMessage(m store.Message) (table string, cols []string, vals []any, err error) {
	raw, err := rec(m)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", store.KindAgentMessages, err)
	}
	var expires, client any
	if !m.ExpiresAt.IsZero() {
		expires = m.ExpiresAt
	}
	if m.Direction == store.Inbound && m.ClientID != "" {
		client = m.ClientID
	}
	return "messages", []string{"id", "company_id", "device_id", "uuid", "direction", "channel", "phone", "status", "expires_at",
			"created_at", "updated_at", "rec", "number_id", "agent_client"},
		[]any{id(m.ID), id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, expires,
			m.CreatedAt, m.UpdatedAt, raw, id(m.NumberID), client}, nil
}

// row is a record as its table's row: the table, its columns and their values.
func (l *loader) row(r store.CopyRecord) (table string, cols []string, vals []any, err error) {
	var raw []byte
	switch r := r.(type) {
	case store.CopyCompany:
		c := r.Company
		if raw, err = rec(c); err == nil {
			return "companies", []string{"id", "api_key_hash", "rec"}, []any{id(c.ID), c.APIKeyHash, raw}, nil
		}
	case store.CopyUser:
		u := r.User
		if raw, err = rec(u); err == nil {
			return "users", []string{"id", "company_id", "email", "held", "rec"}, []any{id(u.ID), id(u.CompanyID), emailKey(u.Email), r.Held, raw}, nil
		}
	case store.CopyDevice:
		d := r.Device
		var token []byte
		var deleted *time.Time
		if r.Deleted {
			deleted = &l.now
		} else {
			token = d.TokenHash
		}
		if raw, err = rec(d); err == nil {
			return "devices", []string{"id", "company_id", "fingerprint", "token_hash", "deleted_at", "rec"},
				[]any{id(d.ID), id(d.CompanyID), d.Fingerprint, token, deleted, raw}, nil
		}
	case store.CopyPairing:
		p := r.Pairing
		if raw, err = rec(p); err == nil {
			return "pairings", []string{"hash", "company_id", "expires_at", "rec"}, []any{r.Hash, id(p.CompanyID), p.ExpiresAt, raw}, nil
		}
	case store.CopySubscription:
		sub := r.Subscription
		var customer *string
		if sub.CustomerID != "" {
			customer = &sub.CustomerID
		}
		if raw, err = rec(sub); err == nil {
			return "subscriptions", []string{"company_id", "customer_id", "rec"}, []any{id(sub.CompanyID), customer, raw}, nil
		}
	case store.CopyPlanUsage:
		return "plan_usage", []string{"company_id", "period_start", "shard", "used"}, []any{id(r.CompanyID), r.PeriodStart, int16(0), r.Used}, nil
	case store.CopyStorageUsage:
		return "storage_usage", []string{"company_id", "day", "shard", "used"}, []any{id(r.CompanyID), int32(r.Day), int16(0), r.Used}, nil
	case store.CopyActivity:
		a := r.Activity
		a.At = a.At.UTC()
		if raw, err = rec(a); err == nil {
			return "activity", []string{"company_id", "rec"}, []any{id(r.CompanyID), raw}, nil
		}
	case store.CopyStats:
		c := r.Counts
		return "stats_days", []string{"company_id", "day", "channel", "device_id", "user_id", "shard", "sent", "delivered", "failed", "received", "expired", "segments"},
			[]any{id(r.CompanyID), int32(r.Day), int16(r.Channel), id(r.DeviceID), id(r.UserID), int16(0),
				int64(c.Sent), int64(c.Delivered), int64(c.Failed), int64(c.Received), int64(c.Expired), int64(c.Segments)}, nil
	case store.CopyTokenFamily:
		f := r.Token
		if raw, err = rec(f); err == nil {
			return "token_families", []string{"family", "user_id", "revoked", "rec"}, []any{r.Family, id(f.UserID), f.Revoked, raw}, nil
		}
	case store.CopyRefreshToken:
		tok := r.Token
		if raw, err = rec(tok); err == nil {
			return "refresh_tokens", []string{"hash", "family", "expires_at", "rec"}, []any{r.Hash, tok.Family, tok.ExpiresAt, raw}, nil
		}
	case store.CopyOneTimeToken:
		tok := r.Token
		if raw, err = rec(tok); err == nil {
			return "one_time_tokens", []string{"hash", "expires_at", "rec"}, []any{r.Hash, tok.ExpiresAt, raw}, nil
		}
	case store.CopyConsoleSession:
		sess := r.Session
		if raw, err = rec(sess); err == nil {
			return "console_sessions", []string{"hash", "user_id", "seen_at", "expires_at", "rec"}, []any{r.Hash, id(sess.UserID), sess.SeenAt, sess.ExpiresAt, raw}, nil
		}
	case store.CopyMessage:
		m := r.Message
		if store.IsAgentChannel(m.Channel) {
			return l.agentMessage(m)
		}
		var clientID any
		if m.Direction == store.Inbound && m.ClientID != "" {
			clientID = m.ClientID
		}
		var place, due, expires any
		if m.Direction == store.Outbound {
			place, due, expires = sendColumns(m)
		}
		if raw, err = rec(m); err == nil {
			return "messages", []string{"id", "company_id", "device_id", "uuid", "direction", "channel", "phone", "status", "client_id",
					"priority", "queue_place", "due_at", "expires_at", "created_at", "updated_at", "rec"},
				[]any{id(m.ID), id(m.CompanyID), id(m.DeviceID), m.UUID, m.Direction, m.Channel, m.Phone, m.Status, clientID,
					int16(m.Priority), place, due, expires, m.CreatedAt, m.UpdatedAt, raw}, nil
		}
	case store.CopyIdempotency:
		if raw, err = rec(r.Answer); err == nil {
			return "idempotency", []string{"company_id", "route", "key", "created_at", "rec"}, []any{id(r.CompanyID), r.Route, r.Key, r.Answer.CreatedAt, raw}, nil
		}
	case store.CopyOptOut:
		o := r.OptOut
		if raw, err = rec(o); err == nil {
			return "opt_outs", []string{"company_id", "phone", "rec"}, []any{id(r.CompanyID), o.Phone, raw}, nil
		}
	case store.CopyDeviceFailure:
		if raw, err = rec(r.Failure); err == nil {
			return "device_failures", []string{"device_id", "company_id", "rec"}, []any{id(r.DeviceID), id(r.CompanyID), raw}, nil
		}
	case store.CopyPool:
		p := r.Pool
		if raw, err = rec(p); err == nil {
			// The turn is written with the pools, once they are in (turns):
			// a row per member, those before the one the turn names counted
			// one turn more, so the next send takes that one (poolpick.go).
			for i, m := range p.Members {
				var taken int64
				if uint64(i) < r.Turn%uint64(len(p.Members)) {
					taken = 1
				}
				l.turns = append(l.turns, [3]int64{id(p.ID), id(m.ID), taken})
			}
			return "pools", []string{"id", "company_id", "name_key", "rec"}, []any{id(p.ID), id(p.CompanyID), poolNameKey(p.Name), raw}, nil
		}
	case store.CopySticky:
		return "pool_sticky", []string{"pool_id", "phone", "device_id", "sim_slot", "written_at"},
			[]any{id(r.PoolID), r.Phone, id(r.DeviceID), r.SIMSlot, r.WrittenAt}, nil
	case store.CopySIMCaps:
		if raw, err = rec(r.Caps); err == nil {
			return "sim_caps", []string{"device_id", "sim_slot", "company_id", "rec"}, []any{id(r.DeviceID), r.Slot, id(r.CompanyID), raw}, nil
		}
	case store.CopySIMUsage:
		return "sim_usage", []string{"device_id", "sim_slot", "kind", "period", "n"}, []any{id(r.DeviceID), r.Slot, string(rune(r.Kind)), r.Period, r.N}, nil
	case store.CopySIMRecipient:
		return "sim_recipients", []string{"device_id", "sim_slot", "day", "phone"}, []any{id(r.DeviceID), r.Slot, r.Day, r.Phone}, nil
	case store.CopySIMStreak:
		return "sim_streaks", []string{"device_id", "sim_slot", "company_id", "n", "last_at"}, []any{id(r.DeviceID), r.Slot, id(r.CompanyID), r.N, r.LastAt}, nil
	case store.CopyWebhookSet:
		if raw, err = rec(r.Set); err == nil {
			return "webhook_sets", []string{"company_id", "rec"}, []any{id(r.Set.CompanyID), raw}, nil
		}
	case store.CopyWebhookEvent:
		return "webhook_events", []string{"id", "company_id", "pending", "body"}, []any{r.ID, id(r.CompanyID), r.Pending, r.Body}, nil
	case store.CopyWebhookDelivery:
		d := r.Delivery
		if len(d.Body) > 0 { // written before events were shared: its bytes are its own
			l.ownBodies[d.CompanyID] += int64(len(d.Body))
		}
		if raw, err = rec(d); err == nil {
			return "webhook_deliveries", []string{"id", "company_id", "webhook_id", "event_id", "next_attempt_at", "rec"},
				[]any{id(d.ID), id(d.CompanyID), id(d.WebhookID), d.EventID, d.NextAttemptAt, raw}, nil
		}
	case store.CopyWebhookAttempt:
		a := r.Attempt
		if raw, err = rec(a); err == nil {
			return "webhook_attempts", []string{"id", "company_id", "webhook_id", "created_at", "rec"}, []any{id(a.ID), id(a.CompanyID), id(a.WebhookID), a.CreatedAt, raw}, nil
		}
	case store.CopyMail:
		m := r.Mail
		if raw, err = rec(m); err == nil {
			return "mail_outbox", []string{"id", "state", "created_at", "rec", "company_id", "size"},
				[]any{id(m.ID), m.State, m.CreatedAt, raw, id(m.CompanyID), store.MailSize(m)}, nil
		}
	case store.CopyMedia:
		m := r.Media
		var msg any
		if m.MessageID != 0 {
			msg = id(m.MessageID)
		}
		if raw, err = rec(m); err == nil {
			return "media", []string{"id", "company_id", "device_id", "key", "message_id", "created_at", "rec"},
				[]any{m.ID, id(m.CompanyID), id(m.DeviceID), m.Key, msg, m.CreatedAt, raw}, nil
		}
	case store.CopyBillingEvent:
		return "billing_events", []string{"event_id", "applied_at"}, []any{r.ID, r.AppliedAt}, nil
	case store.CopyAgentNumber:
		n := r.Number
		var holder any
		if n.DeviceID != 0 {
			holder = id(n.DeviceID)
		}
		if raw, err = rec(n); err == nil {
			return "agent_numbers", []string{"id", "company_id", "channel", "address", "public_id", "device_id", "rec"},
				[]any{id(n.ID), id(n.CompanyID), n.Channel, n.Address, n.PublicID, holder, raw}, nil
		}
	case store.CopyAgentSend:
		return "agent_sends", []string{"company_id", "number_id", "sent_at", "message_id"}, []any{id(r.CompanyID), id(r.NumberID), r.SentAt, id(r.MessageID)}, nil
	case store.CopyMediaChunk:
		return "media_chunks", []string{"media_id", "n", "data"}, []any{r.MediaID, int32(r.N), r.Data}, nil
	}
	if err == nil {
		return "", nil, nil, fmt.Errorf("%s (%T): this build cannot load that kind into PostgreSQL yet", r.CopyKind(), r)
	}
	return "", nil, nil, fmt.Errorf("%s: %w", r.CopyKind(), err)
}
