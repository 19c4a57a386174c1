package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// The store read whole for a copy to another backend (store.Dumper;
// simrelay admin copy-store). Both the dump and the counts read one
// transaction each and write nothing, so they work on a store opened
// read-only; a file whose schema is not this build's (an older file a
// read-only open did not migrate) is refused, since its buckets are not
// the ones read here.

var _ store.Dumper = (*Store)(nil)

// dumped are the kinds Dump gives, in store.Kinds' order.
var dumped = []store.Kind{
	store.KindCompanies, store.KindUsers, store.KindDevices, store.KindPairings, store.KindSubscriptions,
	store.KindPlanUsage, store.KindStorageUsage, store.KindActivity, store.KindStats, store.KindTokenFamilies,
	store.KindRefreshTokens, store.KindOneTimeTokens, store.KindConsoleSessions, store.KindSecrets,
	store.KindMessages, store.KindIdempotency, store.KindOptOuts, store.KindDeviceFailures, store.KindPools,
	store.KindStickyEntries, store.KindSIMCaps, store.KindSIMCounts, store.KindWebhookSets, store.KindWebhookEvents,
	store.KindWebhookDeliveries, store.KindWebhookAttempts, store.KindMail, store.KindMedia, store.KindBillingEvents,
	store.KindAgentNumbers, store.KindAgentSends, store.KindAgentMessages,
}

// bucketKinds says, for every bucket of the file, what a dump makes of it:
// the kind it gives (its records, or a part of them), or "" for an index
// the destination derives from the records (its own indexes, columns or
// triggers). A bucket added without a line here fails TestEveryBucketCopied,
// so no data is left behind by a copy unseen.
var bucketKinds = map[string]store.Kind{
	// the server's own
	"meta": store.KindSecrets, // and the schema's version, the file's own
	// accounts
	"companies":             store.KindCompanies,
	"api_keys":              "",
	"users":                 store.KindUsers,
	"users_by_email":        store.KindUsers, // CopyUser.Held
	"company_users":         "",
	"refresh_tokens":        store.KindRefreshTokens,
	"token_families":        store.KindTokenFamilies,
	"user_families":         "",
	"onetime_tokens":        store.KindOneTimeTokens,
	"console_sessions":      store.KindConsoleSessions,
	"user_console_sessions": "",
	// devices
	"pairings":           store.KindPairings,
	"devices":            store.KindDevices,
	"device_tokens":      "",
	"company_device_ids": "",
	"disabled_devices":   "",
	"dev_failures":       store.KindDeviceFailures,
	// messages
	"messages":           store.KindMessages, // and store.KindAgentMessages
	"message_uuids":      "",
	"dev_queue":          "",
	"dev_queue_priority": "",
	"dev_sending":        "",
	"queue_expiry":       "",
	"schedule_due":       "",
	"dev_scheduled":      "",
	"dev_conv_messages":  "",
	"dev_conversations":  "",
	"dev_conv_order":     "",
	"inbound_company":    "",
	"dev_inbound":        "",
	"dev_inbound_client": "",
	"idempotency":        store.KindIdempotency,
	"opt_outs":           store.KindOptOuts,
	// counters and activity
	"stats_days":         store.KindStats,
	"stats_company_days": "",
	"stats_device_days":  "",
	"stats_user_days":    "",
	"stats_totals":       "",
	"stats_devices":      store.KindDevices, // the deleted registrations
	"activity":           store.KindActivity,
	"activity_head":      store.KindActivity,
	"company_usage":      store.KindStorageUsage,
	// billing
	"subscriptions":    store.KindSubscriptions,
	"plan_usage":       store.KindPlanUsage,
	"billing_events":   store.KindBillingEvents,
	"billing_customer": "", // the subscription's customer id
	// webhooks and mail
	"webhook_sets":         store.KindWebhookSets,
	"webhook_events":       store.KindWebhookEvents,
	"webhook_event_refs":   store.KindWebhookEvents, // CopyWebhookEvent.Pending
	"webhook_deliveries":   store.KindWebhookDeliveries,
	"webhook_due":          "",
	"webhook_outbox_sizes": "",
	"webhook_attempts":     store.KindWebhookAttempts,
	"webhook_log_sizes":    "",
	"mail_outbox":          store.KindMail,
	// media
	"media":         store.KindMedia,
	"media_chunks":  store.KindMedia, // CopyMediaChunk
	"media_keys":    "",
	"media_orphans": "",
	// pools and SIMs
	"pools":       store.KindPools,
	"pool_names":  "",
	"pool_turns":  store.KindPools, // CopyPool.Turn
	"pool_sticky": store.KindStickyEntries,
	"sim_caps":    store.KindSIMCaps,
	"sim_usage":   store.KindSIMCounts,
	"sim_recip":   store.KindSIMCounts,
	"sim_streak":  store.KindSIMCounts,
	// agents
	"agent_numbers":        store.KindAgentNumbers,
	"agent_number_ids":     "",
	"agent_number_ref":     "",
	"agent_number_held":    "",
	"agent_queue":          "",
	"agent_messages":       store.KindAgentMessages, // the dump's way to them
	"agent_sends":          store.KindAgentSends,
	"agent_inbound_client": "",
}

// DumpKinds are the kinds Dump gives.
func (s *Store) DumpKinds() []store.Kind { return dumped }

// current refuses a file whose schema is not this build's or that is half
// way through a migration.
func current(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return errors.New("the data file holds no simrelay schema")
	}
	var v uint64
	if raw := meta.Get(keySchemaVersion); raw != nil {
		v = btoi(raw)
	}
	if v != SchemaVersion() || meta.Get(keyMigrating) != nil {
		return fmt.Errorf("the data file has schema version %d (migrating: %t) where this build reads %d: run this build's simrelay serve on it once, so it migrates the file, then stop it and copy again",
			v, meta.Get(keyMigrating) != nil, SchemaVersion())
	}
	return nil
}

// Dump passes every record of the kinds DumpKinds names to put, kind by kind
// in store.Kinds' order, from one read transaction: first a
// store.CopyLastIDs, then the records. A company's activity comes oldest
// first.
func (s *Store) Dump(put func(store.CopyRecord) error) error {
	err := s.view(func(tx *bolt.Tx) error {
		if err := current(tx); err != nil {
			return err
		}
		if err := put(store.CopyLastIDs{
			store.KindCompanies:         tx.Bucket(bucketCompanies).Sequence(),
			store.KindUsers:             tx.Bucket(bucketUsers).Sequence(),
			store.KindDevices:           tx.Bucket(bucketDevices).Sequence(),
			store.KindMessages:          tx.Bucket(bucketMessages).Sequence(),
			store.KindPools:             tx.Bucket(bucketPools).Sequence(),
			store.KindWebhookSets:       tx.Bucket(bucketWebhookSets).Sequence(), // entry ids
			store.KindWebhookDeliveries: tx.Bucket(bucketWebhookDeliveries).Sequence(),
			store.KindWebhookAttempts:   tx.Bucket(bucketWebhookAttempts).Sequence(),
			store.KindMail:              tx.Bucket(bucketMailOutbox).Sequence(),
			store.KindAgentNumbers:      tx.Bucket(bucketAgentNumbers).Sequence(),
		}); err != nil {
			return err
		}
		for _, dump := range []func(*bolt.Tx, func(store.CopyRecord) error) error{
			dumpCompanies, dumpUsers, dumpDevices, dumpPairings, dumpSubscriptions, dumpPlanUsage, dumpStorageUsage,
			dumpActivity, dumpStats, dumpTokenFamilies, dumpRefreshTokens, dumpOneTimeTokens, dumpConsoleSessions, dumpSecrets,
			dumpMessages, dumpIdempotency, dumpOptOuts, dumpDeviceFailures, dumpPools, dumpSticky, dumpSIMCaps, dumpSIMCounts,
			dumpWebhookSets, dumpWebhookEvents, dumpWebhookDeliveries, dumpWebhookAttempts, dumpMail, dumpMedia,
			dumpBillingEvents, dumpAgentNumbers, dumpAgentSends, dumpAgentMessages,
		} {
			if err := dump(tx, put); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: dump: %w", err)
	}
	return nil
}

// eachRecord decodes each value of a bucket into a T and passes it, with
// its key, to fn.
func eachRecord[T any](tx *bolt.Tx, bucket []byte, fn func(k []byte, v T) error) error {
	return tx.Bucket(bucket).ForEach(func(k, raw []byte) error {
		var v T
		if err := decodeRecord(raw, &v); err != nil {
			return fmt.Errorf("%s %x: %w", bucket, k, err)
		}
		return fn(k, v)
	})
}

func dumpCompanies(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketCompanies, func(_ []byte, c Company) error {
		return put(store.CopyCompany{Company: c})
	})
}

func dumpUsers(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	byEmail := tx.Bucket(bucketUsersByEmail)
	return eachRecord(tx, bucketUsers, func(_ []byte, u User) error {
		held := bytes.Equal(byEmail.Get(emailKey(u.Email)), itob(u.ID))
		return put(store.CopyUser{User: u, Held: held})
	})
}

// dumpDevices gives the live registrations, then the deleted ones the
// counters' names keep (stats_devices): their id, company, fingerprint and
// name are all that is left of them.
func dumpDevices(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	live := map[[16]byte]bool{}
	if err := eachRecord(tx, bucketDevices, func(_ []byte, d Device) error {
		live[[16]byte(pair(d.CompanyID, d.ID))] = true
		return put(store.CopyDevice{Device: d})
	}); err != nil {
		return err
	}
	return eachDeletedDevice(tx, live, func(d Device) error { return put(store.CopyDevice{Device: d, Deleted: true}) })
}

// eachDeletedDevice passes each registration the counters name that is not
// live to fn.
func eachDeletedDevice(tx *bolt.Tx, live map[[16]byte]bool, fn func(Device) error) error {
	return tx.Bucket(bucketStatsDevices).ForEach(func(k, v []byte) error {
		if len(k) != 16 || live[[16]byte(k)] {
			return nil
		}
		fp, name, _ := bytes.Cut(v, []byte{0})
		return fn(Device{ID: btoi(k[8:]), CompanyID: btoi(k[:8]), Fingerprint: string(fp), Name: string(name)})
	})
}

func dumpPairings(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketPairings, func(k []byte, p Pairing) error {
		return put(store.CopyPairing{Hash: bytes.Clone(k), Pairing: p})
	})
}

func dumpSubscriptions(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketSubscriptions, func(k []byte, sub Subscription) error {
		sub.CompanyID = btoi(k)
		return put(store.CopySubscription{Subscription: sub})
	})
}

func dumpPlanUsage(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketPlanUsage).ForEach(func(k, v []byte) error {
		if len(k) != 16 || len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %x", bucketPlanUsage, k)
		}
		return put(store.CopyPlanUsage{CompanyID: btoi(k[:8]), PeriodStart: time.Unix(int64(btoi(k[8:])), 0).UTC(), Used: int64(btoi(v))})
	})
}

func dumpStorageUsage(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketCompanyUsage).ForEach(func(k, v []byte) error {
		if len(k) != 16 || len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %x", bucketCompanyUsage, k)
		}
		return put(store.CopyStorageUsage{CompanyID: btoi(k[:8]), Day: uint32(btoi(k[8:])), Used: int64(btoi(v))})
	})
}

// activitySlots calls fn with each slot of the company's ring that holds an
// event, oldest first.
func activitySlots(tx *bolt.Tx, companyID uint64, fn func(slot uint64) error) error {
	var n uint64
	if v := tx.Bucket(bucketActivityHead).Get(itob(companyID)); len(v) == 8 {
		n = btoi(v)
	}
	for i := n - min(n, ActivityKeep); i < n; i++ {
		if err := fn(i % ActivityKeep); err != nil {
			return err
		}
	}
	return nil
}

func dumpActivity(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	ring := tx.Bucket(bucketActivity)
	return tx.Bucket(bucketActivityHead).ForEach(func(k, _ []byte) error {
		companyID := btoi(k)
		return activitySlots(tx, companyID, func(slot uint64) error {
			var a Activity
			if err := getJSON(ring, pair(companyID, slot), &a); err != nil {
				return fmt.Errorf("activity %d of company %d: %w", slot, companyID, err)
			}
			return put(store.CopyActivity{CompanyID: companyID, Activity: a})
		})
	})
}

func dumpStats(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketStatsDays).ForEach(func(k, v []byte) error {
		if len(k) != 29 {
			return fmt.Errorf("%s: malformed key %x", bucketStatsDays, k)
		}
		return put(store.CopyStats{
			CompanyID: btoi(k[:8]), Day: binary.BigEndian.Uint32(k[8:12]), Channel: k[12],
			DeviceID: btoi(k[13:21]), UserID: btoi(k[21:29]), Counts: decodeCounts(v),
		})
	})
}

func dumpTokenFamilies(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketTokenFamilies, func(k []byte, f TokenFamily) error {
		return put(store.CopyTokenFamily{Family: string(k), Token: f})
	})
}

func dumpRefreshTokens(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketRefreshTokens, func(k []byte, t RefreshToken) error {
		return put(store.CopyRefreshToken{Hash: bytes.Clone(k), Token: t})
	})
}

func dumpOneTimeTokens(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketOneTimeTokens, func(k []byte, t OneTimeToken) error {
		return put(store.CopyOneTimeToken{Hash: bytes.Clone(k), Token: t})
	})
}

func dumpConsoleSessions(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketConsoleSessions, func(k []byte, sess ConsoleSession) error {
		return put(store.CopyConsoleSession{Hash: bytes.Clone(k), Session: sess})
	})
}

func dumpSecrets(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	var err error
	walkPrefix(tx.Bucket(bucketMeta), []byte(secretPrefix), func(k, v []byte) bool {
		err = put(store.CopySecret{Name: string(k[len(secretPrefix):]), Value: bytes.Clone(v)})
		return err == nil
	})
	return err
}

// dumpMessages gives the messages of every channel but the agents'
// (dumpAgentMessages).
func dumpMessages(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketMessages, func(_ []byte, m Message) error {
		if store.IsAgentChannel(m.Channel) {
			return nil
		}
		return put(store.CopyMessage{Message: m})
	})
}

// dumpIdempotency gives the answers kept for Idempotency-Keys, those kept
// before keys had routes (company id and key alone) with no route.
func dumpIdempotency(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketIdempotency, func(k []byte, a Idempotent) error {
		if len(k) < 9 {
			return fmt.Errorf("%s: malformed key %x", bucketIdempotency, k)
		}
		r := store.CopyIdempotency{CompanyID: btoi(k[:8]), Key: string(k[8:]), Answer: a}
		if k[8] == 0 {
			route, key, ok := bytes.Cut(k[9:], []byte{0})
			if !ok {
				return fmt.Errorf("%s: malformed key %x", bucketIdempotency, k)
			}
			r.Route, r.Key = string(route), string(key)
		}
		return put(r)
	})
}

func dumpOptOuts(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketOptOuts, func(k []byte, o OptOut) error {
		if len(k) < 8 {
			return fmt.Errorf("%s: malformed key %x", bucketOptOuts, k)
		}
		if o.Phone == "" {
			o.Phone = string(k[8:])
		}
		return put(store.CopyOptOut{CompanyID: btoi(k[:8]), OptOut: o})
	})
}

// dumpDeviceFailures gives each device's failures oldest first.
func dumpDeviceFailures(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketDeviceFailures, func(k []byte, list []DeviceFailure) error {
		if len(k) != 16 {
			return fmt.Errorf("%s: malformed key %x", bucketDeviceFailures, k)
		}
		for i := len(list) - 1; i >= 0; i-- {
			if err := put(store.CopyDeviceFailure{CompanyID: btoi(k[:8]), DeviceID: btoi(k[8:]), Failure: list[i]}); err != nil {
				return err
			}
		}
		return nil
	})
}

func dumpPools(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	turns := tx.Bucket(bucketPoolTurns)
	return eachRecord(tx, bucketPools, func(k []byte, p Pool) error {
		var turn uint64
		if v := turns.Get(k); len(v) == 8 {
			turn = btoi(v)
		}
		return put(store.CopyPool{Pool: p, Turn: turn})
	})
}

// dumpSticky gives the sticky entries: company id + pool id + phone ->
// device id, written at (unix ns), slot.
func dumpSticky(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketPoolSticky).ForEach(func(k, v []byte) error {
		if len(k) < 16 || len(v) < 16 {
			return fmt.Errorf("%s: malformed entry %x", bucketPoolSticky, k)
		}
		return put(store.CopySticky{CompanyID: btoi(k[:8]), PoolID: btoi(k[8:16]), Phone: string(k[16:]),
			DeviceID: btoi(v[:8]), WrittenAt: time.Unix(0, int64(btoi(v[8:16]))).UTC(), SIMSlot: string(v[16:])})
	})
}

// simKeyParts splits a key of simKey: company, device, slot and what
// follows the slot's zero byte.
func simKeyParts(bucket, k []byte) (companyID, deviceID uint64, slot string, rest []byte, err error) {
	if len(k) < 17 {
		return 0, 0, "", nil, fmt.Errorf("%s: malformed key %x", bucket, k)
	}
	s, rest, ok := bytes.Cut(k[16:], []byte{0})
	if !ok {
		return 0, 0, "", nil, fmt.Errorf("%s: malformed key %x", bucket, k)
	}
	return btoi(k[:8]), btoi(k[8:16]), string(s), rest, nil
}

func dumpSIMCaps(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketSIMCaps, func(k []byte, caps SIMCaps) error {
		cid, dev, slot, _, err := simKeyParts(bucketSIMCaps, k)
		if err != nil {
			return err
		}
		return put(store.CopySIMCaps{CompanyID: cid, DeviceID: dev, Slot: slot, Caps: caps})
	})
}

// stamp reads a yyyymmdd or yyyymm stamp of the SIM counts.
func stamp(b []byte) (int32, error) {
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil || (len(b) != 8 && len(b) != 6) {
		return 0, fmt.Errorf("malformed stamp %q", b)
	}
	return int32(n), nil
}

// dumpSIMCounts gives the SIMs' counts (sim_usage: 'd' or 'r' and a day,
// or 'm' and a month), their recipients of a day and their carrier
// failure streaks.
func dumpSIMCounts(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	if err := tx.Bucket(bucketSIMUsage).ForEach(func(k, v []byte) error {
		cid, dev, slot, rest, err := simKeyParts(bucketSIMUsage, k)
		if err != nil {
			return err
		}
		if len(rest) < 1 || len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %x", bucketSIMUsage, k)
		}
		period, err := stamp(rest[1:])
		if err != nil {
			return fmt.Errorf("%s %x: %w", bucketSIMUsage, k, err)
		}
		return put(store.CopySIMUsage{CompanyID: cid, DeviceID: dev, Slot: slot, Kind: rest[0], Period: period, N: int64(btoi(v))})
	}); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSIMRecip).ForEach(func(k, _ []byte) error {
		cid, dev, slot, rest, err := simKeyParts(bucketSIMRecip, k)
		if err != nil {
			return err
		}
		if len(rest) < 8 {
			return fmt.Errorf("%s: malformed key %x", bucketSIMRecip, k)
		}
		day, err := stamp(rest[:8])
		if err != nil {
			return fmt.Errorf("%s %x: %w", bucketSIMRecip, k, err)
		}
		return put(store.CopySIMRecipient{CompanyID: cid, DeviceID: dev, Slot: slot, Day: day, Phone: string(rest[8:])})
	}); err != nil {
		return err
	}
	return tx.Bucket(bucketSIMStreak).ForEach(func(k, v []byte) error {
		cid, dev, slot, _, err := simKeyParts(bucketSIMStreak, k)
		if err != nil {
			return err
		}
		if len(v) != 16 {
			return fmt.Errorf("%s: malformed entry %x", bucketSIMStreak, k)
		}
		return put(store.CopySIMStreak{CompanyID: cid, DeviceID: dev, Slot: slot, N: int64(btoi(v[:8])), LastAt: time.Unix(0, int64(btoi(v[8:]))).UTC()})
	})
}

func dumpWebhookSets(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketWebhookSets, func(k []byte, set WebhookSet) error {
		set.CompanyID = btoi(k)
		return put(store.CopyWebhookSet{Set: set})
	})
}

// dumpWebhookEvents gives each event's body with its pending deliveries'
// count; its company is its deliveries'. A delivery written before events
// were shared (schema 2) that carries its own body may name an event no
// record holds: that event is given with no body and none pending on it, so
// the delivery's event is there whatever the destination requires of it.
func dumpWebhookEvents(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	owner, bodiless, err := webhookEventOwners(tx)
	if err != nil {
		return err
	}
	refs := tx.Bucket(bucketWebhookEventRefs)
	if err := tx.Bucket(bucketWebhookEvents).ForEach(func(k, v []byte) error {
		var pending int64
		if r := refs.Get(k); len(r) == 8 {
			pending = int64(btoi(r))
		}
		return put(store.CopyWebhookEvent{ID: string(k), CompanyID: owner[string(k)], Body: bytes.Clone(v), Pending: pending})
	}); err != nil {
		return err
	}
	for _, id := range bodiless {
		if err := put(store.CopyWebhookEvent{ID: id, CompanyID: owner[id], Body: []byte{}}); err != nil {
			return err
		}
	}
	return nil
}

// webhookEventOwners maps each event a pending delivery names to the
// delivery's company, and lists, in order, the events named only by
// deliveries with their own bodies that no record holds.
func webhookEventOwners(tx *bolt.Tx) (owner map[string]uint64, bodiless []string, err error) {
	owner = map[string]uint64{}
	events := tx.Bucket(bucketWebhookEvents)
	seen := map[string]bool{}
	err = eachRecord(tx, bucketWebhookDeliveries, func(_ []byte, d WebhookDelivery) error {
		owner[d.EventID] = d.CompanyID
		if len(d.Body) > 0 && !seen[d.EventID] && events.Get([]byte(d.EventID)) == nil {
			seen[d.EventID] = true
			bodiless = append(bodiless, d.EventID)
		}
		return nil
	})
	slices.Sort(bodiless)
	return owner, bodiless, err
}

func dumpWebhookDeliveries(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketWebhookDeliveries, func(_ []byte, d WebhookDelivery) error {
		return put(store.CopyWebhookDelivery{Delivery: d})
	})
}

func dumpWebhookAttempts(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketWebhookAttempts, func(_ []byte, a WebhookAttempt) error {
		return put(store.CopyWebhookAttempt{Attempt: a})
	})
}

func dumpMail(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketMailOutbox, func(_ []byte, m Mail) error {
		return put(store.CopyMail{Mail: m})
	})
}

// dumpMedia gives each file's record, then its chunks in order.
func dumpMedia(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	chunks := tx.Bucket(bucketMediaChunks)
	return eachRecord(tx, bucketMedia, func(k []byte, m Media) error {
		if err := put(store.CopyMedia{Media: m}); err != nil {
			return err
		}
		prefix := append(bytes.Clone(k), 0)
		var err error
		walkPrefix(chunks, prefix, func(ck, v []byte) bool {
			if len(ck) != len(prefix)+4 {
				err = fmt.Errorf("%s: malformed key %x", bucketMediaChunks, ck)
				return false
			}
			err = put(store.CopyMediaChunk{MediaID: m.ID, N: binary.BigEndian.Uint32(ck[len(prefix):]), Data: bytes.Clone(v)})
			return err == nil
		})
		return err
	})
}

// dumpBillingEvents gives the provider events applied: event id -> unix s.
func dumpBillingEvents(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketBillingEvents).ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %q", bucketBillingEvents, k)
		}
		return put(store.CopyBillingEvent{ID: string(k), AppliedAt: time.Unix(int64(btoi(v)), 0).UTC()})
	})
}

func dumpAgentNumbers(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketAgentNumbers, func(_ []byte, n AgentNumber) error {
		return put(store.CopyAgentNumber{Number: n})
	})
}

// dumpAgentSends gives the accepted sends: company(8) number id(8)
// created_at(8, unix ns) message id(8).
func dumpAgentSends(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketAgentSends).ForEach(func(k, _ []byte) error {
		if len(k) != 32 {
			return fmt.Errorf("%s: malformed key %x", bucketAgentSends, k)
		}
		return put(store.CopyAgentSend{CompanyID: btoi(k[:8]), NumberID: btoi(k[8:16]), SentAt: time.Unix(0, int64(btoi(k[16:24]))).UTC(), MessageID: btoi(k[24:])})
	})
}

// dumpAgentMessages gives the WhatsApp and iMessage messages, through
// their numbers' index: company(8) number id(8) message id(8).
func dumpAgentMessages(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	msgs := tx.Bucket(bucketMessages)
	return tx.Bucket(bucketAgentMessages).ForEach(func(k, _ []byte) error {
		if len(k) != 24 {
			return fmt.Errorf("%s: malformed key %x", bucketAgentMessages, k)
		}
		var m Message
		if err := getJSON(msgs, k[16:], &m); err != nil {
			return fmt.Errorf("agent message %d: %w", btoi(k[16:]), err)
		}
		return put(store.CopyMessage{Message: m})
	})
}

// CopyCounts counts the store's records of every kind of store.Kinds, as a
// dump gives them (a kind Dump does not give yet is counted all the same,
// so a copy can refuse a store that holds it).
func (s *Store) CopyCounts() (map[store.Kind]int64, error) {
	counts := map[store.Kind]int64{}
	err := s.view(func(tx *bolt.Tx) error {
		if err := current(tx); err != nil {
			return err
		}
		keys := func(buckets ...[]byte) int64 {
			var n int64
			for _, b := range buckets {
				n += int64(tx.Bucket(b).Stats().KeyN)
			}
			return n
		}
		for k, buckets := range map[store.Kind][][]byte{
			store.KindCompanies:         {bucketCompanies},
			store.KindUsers:             {bucketUsers},
			store.KindPairings:          {bucketPairings},
			store.KindSubscriptions:     {bucketSubscriptions},
			store.KindPlanUsage:         {bucketPlanUsage},
			store.KindStorageUsage:      {bucketCompanyUsage},
			store.KindStats:             {bucketStatsDays},
			store.KindTokenFamilies:     {bucketTokenFamilies},
			store.KindRefreshTokens:     {bucketRefreshTokens},
			store.KindOneTimeTokens:     {bucketOneTimeTokens},
			store.KindConsoleSessions:   {bucketConsoleSessions},
			store.KindIdempotency:       {bucketIdempotency},
			store.KindOptOuts:           {bucketOptOuts},
			store.KindPools:             {bucketPools},
			store.KindStickyEntries:     {bucketPoolSticky},
			store.KindSIMCaps:           {bucketSIMCaps},
			store.KindSIMCounts:         {bucketSIMUsage, bucketSIMRecip, bucketSIMStreak},
			store.KindWebhookSets:       {bucketWebhookSets},
			store.KindWebhookEvents:     {bucketWebhookEvents},
			store.KindWebhookDeliveries: {bucketWebhookDeliveries},
			store.KindWebhookAttempts:   {bucketWebhookAttempts},
			store.KindMail:              {bucketMailOutbox},
			store.KindMedia:             {bucketMedia},
			store.KindBillingEvents:     {bucketBillingEvents},
			store.KindAgentNumbers:      {bucketAgentNumbers},
			store.KindAgentSends:        {bucketAgentSends},
			store.KindAgentMessages:     {bucketAgentMessages},
		} {
			counts[k] = keys(buckets...)
		}
		live := map[[16]byte]bool{}
		if err := tx.Bucket(bucketDevices).ForEach(func(_, raw []byte) error {
			var d Device
			if err := decodeRecord(raw, &d); err != nil {
				return err
			}
			live[[16]byte(pair(d.CompanyID, d.ID))] = true
			return nil
		}); err != nil {
			return err
		}
		counts[store.KindMessages] = keys(bucketMessages) - counts[store.KindAgentMessages]
		_, bodiless, err := webhookEventOwners(tx)
		if err != nil {
			return err
		}
		counts[store.KindWebhookEvents] += int64(len(bodiless))
		counts[store.KindDevices] = int64(len(live))
		if err := eachRecord(tx, bucketDeviceFailures, func(_ []byte, list []DeviceFailure) error {
			counts[store.KindDeviceFailures] += int64(len(list))
			return nil
		}); err != nil {
			return err
		}
		if err := eachDeletedDevice(tx, live, func(Device) error { counts[store.KindDevices]++; return nil }); err != nil {
			return err
		}
		if err := tx.Bucket(bucketActivityHead).ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				counts[store.KindActivity] += int64(min(btoi(v), ActivityKeep))
			}
			return nil
		}); err != nil {
			return err
		}
		walkPrefix(tx.Bucket(bucketMeta), []byte(secretPrefix), func(_, _ []byte) bool { counts[store.KindSecrets]++; return true })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: count records: %w", err)
	}
	return counts, nil
}
