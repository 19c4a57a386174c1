package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store/postgres"
	"github.com/simrelay/simrelay/web"
)

// sharedLimits is what a node of a cluster shares with the others beyond
// the store's own rules (contract section 12, docs/cluster.md "What is
// shared between nodes"): the API's rate-limit windows, the reset
// mails' and the failed logins' windows (an address's, a client's share
// of it, a device cookie's), through the database, and the
// API key cache, invalidated on every node over the bus.
// On one node (no bus) it is empty and nothing of it runs.
type sharedLimits struct {
	// limiters are the API's shared windows; nil on one node.
	limiters httpapi.Limiters
	// peers is the census of the nodes on the bus; nil on one node.
	peers *cluster.Peers
	// streams are the console's live views of every node; nil on one node.
	streams *postgres.StreamLeases
	// resets are the reset mails' windows (account.ShareResetMails), and
	// logins the failed logins' of e-mail addresses, client shares and
	// device cookies (account.ShareFailedLogins); run sweeps their ended
	// ones. nil and none on one node.
	resets *postgres.Windows
	logins [3]*postgres.Windows
	// offline are the offline mails' windows (device.ShareOfflineMails),
	// invites the invitations' (account.ShareInvites); run sweeps their
	// ended ones. nil on one node.
	offline, invites *postgres.Windows
	// settings compares this node's settings with the other nodes'; nil
	// on one node.
	settings *cluster.Settings
	log      *slog.Logger
}

// shareLimits makes this node's limits and caches the cluster's when bus is
// set (a node of a cluster, on PostgreSQL), and returns the zero
// sharedLimits otherwise; a lone server on PostgreSQL reads a cached API
// key again after the cluster's cache TTL, as a node does, since the
// admin commands beside it may take a key away (delete-company). settings gives this node's shared settings, their
// secrets digested with the key it is given (serveConfig.sharedSettings):
// the cluster's secret in the database, read here.
func shareLimits(bus *cluster.Bus, st backend, accounts *account.Service, devices *device.Service, settings func(key []byte) map[string]string, log *slog.Logger) (sharedLimits, error) {
	if bus == nil {
		if _, ok := st.(*postgres.Store); ok {
			accounts.SetKeyTTL(cluster.DefaultCacheTTL)
		}
		return sharedLimits{}, nil
	}
	pg, ok := st.(*postgres.Store)
	if !ok {
		return sharedLimits{}, errors.New("a cluster (--nats-url) needs its store in PostgreSQL (--database-url)")
	}
	peers, err := cluster.NewPeers(bus, 0, nil)
	if err != nil {
		return sharedLimits{}, err
	}
	if err := accounts.SetPeers(cluster.NewCaches(bus, peers, 0), cluster.DefaultCacheTTL); err != nil {
		return sharedLimits{}, err
	}
	streams, err := pg.StreamLeases(bus.Node())
	if err != nil {
		return sharedLimits{}, err
	}
	resets, err := pg.Windows(account.ResetScope, account.ResetRate())
	if err != nil {
		return sharedLimits{}, err
	}
	accounts.ShareResetMails(resets)
	offline, err := pg.Windows(device.OfflineMailScope, device.OfflineMailRate())
	if err != nil {
		return sharedLimits{}, err
	}
	devices.ShareOfflineMails(offline)
	invites, err := pg.Windows(account.InviteScope, account.InviteRate())
	if err != nil {
		return sharedLimits{}, err
	}
	accounts.ShareInvites(invites)
	var logins [3]*postgres.Windows
	for i, w := range []struct {
		scope string
		rate  pacing.Rate
	}{{account.LoginScope, accounts.LoginRate()}, {account.ClientShareScope, accounts.ClientShareRate()}, {account.DeviceScope, accounts.DeviceRate()}} {
		if logins[i], err = pg.Windows(w.scope, w.rate); err != nil {
			return sharedLimits{}, err
		}
	}
	accounts.ShareFailedLogins(account.SharedLogins{Addresses: logins[0], Clients: logins[1], Devices: logins[2]})
	key, err := pg.Secret(cluster.DigestSecret, cluster.DigestSecretSize)
	if err != nil {
		return sharedLimits{}, fmt.Errorf("the key of the settings' digests: %w", err)
	}
	compared, err := cluster.NewSettings(bus, settings(key), 0, log)
	if err != nil {
		return sharedLimits{}, err
	}
	log.Info("limits and caches shared with the cluster", "cache_ttl", cluster.DefaultCacheTTL, "stream_lease_ttl", postgres.StreamLeaseTTL)
	return sharedLimits{
		limiters: func(scope string, rate pacing.Rate) (httpapi.Limiter, error) { return pg.Windows(scope, rate) },
		peers:    peers,
		streams:  streams,
		resets:   resets,
		logins:   logins,
		offline:  offline,
		invites:  invites,
		settings: compared,
		log:      log,
	}, nil
}

// metrics registers simrelay_cluster_nodes_other_settings; on one node
// nothing.
func (s sharedLimits) metrics(reg prometheus.Registerer) {
	if s.settings == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "simrelay_cluster_nodes_other_settings",
		Help: "Nodes heard on the bus in the last 30 s whose shared settings (limits, plans, secrets, public URL) differ from this node's; this node's log names them and the settings (docs/cluster.md). Anything but 0 is a misconfigured cluster.",
	}, func() float64 { return float64(s.settings.Differ()) }))
}

// shareStreams makes the broker count the live views of every node; on one
// node it does nothing.
func (s sharedLimits) shareStreams(b *web.Broker) {
	if s.streams != nil {
		b.ShareStreams(s.streams, s.log)
	}
}

// run makes this node heard by the others, renews its stream leases and
// sweeps the reset mails' and failed logins' ended windows until ctx
// ends; on one node it returns at once. (The API's windows are swept with
// the API, sweep.)
func (s sharedLimits) run(ctx context.Context) {
	if s.peers == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.peers.Run(ctx) })
	wg.Go(func() { s.settings.Run(ctx) })
	defer wg.Wait()
	t := time.NewTicker(postgres.StreamLeaseRenew)
	defer t.Stop()
	swept := time.NewTicker(sweepEvery)
	defer swept.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.streams.Renew(); err != nil {
				s.log.Warn("console live views: leases not renewed; they expire unless the next renewal succeeds", "err", err)
			}
		case <-swept.C:
			s.sweep()
		}
	}
}

// sweep deletes the reset mails', failed logins', offline mails' and
// invitations' ended windows.
func (s sharedLimits) sweep() {
	if err := s.resets.Sweep(); err != nil {
		s.log.Warn("reset mails: ended windows not deleted; the next sweep tries again", "err", err)
	}
	for _, w := range s.logins {
		if err := w.Sweep(); err != nil {
			s.log.Warn("failed logins: ended windows not deleted; the next sweep tries again", "err", err)
		}
	}
	if err := s.offline.Sweep(); err != nil {
		s.log.Warn("offline mails: ended windows not deleted; the next sweep tries again", "err", err)
	}
	if err := s.invites.Sweep(); err != nil {
		s.log.Warn("invitations: ended windows not deleted; the next sweep tries again", "err", err)
	}
}
