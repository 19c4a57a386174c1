package boltstore

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// The store read whole for a copy to another backend (store.Dumper;
// simrelay admin copy-store). Both the dump and the counts read one
// transaction each and write nothing, so they work on a store opened
// read-only; a file whose schema is not this build's (an older file a
// read-only open did not migrate) is refused, since its buckets are not
// the ones read here. Each kind is read by a function of its own:
// dump_accounts.go, dump_sends.go and dump_events.go hold them.

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
	"company_emails":        "",
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
	"webhook_due_entries":  "",
	"webhook_outbox_sizes": "",
	"webhook_attempts":     store.KindWebhookAttempts,
	"webhook_log_sizes":    "",
	"mail_outbox":          store.KindMail,
	"mail_company_pending": "", // from Mail.CompanyID and State
	"mail_company":         "", // from Mail.CompanyID
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
	"agent_message_counts": "", // counted from agent_messages
	"agent_queue":          "",
	"agent_handed":         "",                      // from Message.HandedTo of the queued sends
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
