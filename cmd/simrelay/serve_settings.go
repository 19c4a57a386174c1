package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/mail"
)

// sharedSettings are the settings every node of a cluster must run with
// (docs/cluster.md, "What each node needs"), by flag name, as the nodes
// compare them over the bus (cluster.Settings): what a client is answered,
// what a company may do, what a link or a mail says. Secrets and long
// values go as digests. Left out are the settings of one node's own
// resources, which may differ: its address, directory, name, worker and
// connection counts, logs, the console's total of streams, its SMTP
// listener. --smtp-url is compared without its password, which a person
// chose (cluster.Digest).
func (c *serveConfig) sharedSettings() map[string]string {
	plans, err := json.Marshal(c.plans)
	if err != nil { // plain records always marshal
		plans = []byte(err.Error())
	}
	return map[string]string{
		"public-url":            c.publicURL,
		"rate-general":          c.general.String(),
		"rate-auth":             c.auth.String(),
		"message-ttl":           c.messageTTL.String(),
		"device-offline-grace":  c.offlineGrace.String(),
		"link-sweep":            c.linkSweep.String(),
		"node-live-window":      c.cluster.liveWithin.String(),
		"company-daily-storage": strconv.FormatInt(int64(c.companyDailyStorage), 10),
		"webhook-allow-private": strconv.FormatBool(c.webhookAllowPrivate),
		"plans":                 cluster.Digest(string(plans)),
		"default-plan":          c.defaultPlan,
		"stripe-key":            cluster.Digest(c.stripeKey),
		"stripe-webhook-secret": cluster.Digest(c.stripeWebhookSecret),
		"stripe-api-url":        c.stripeAPIURL,
		"admin-token":           cluster.Digest(c.adminToken),
		"smtp-url":              mail.Config{SMTPURL: c.smtpURL}.Redacted(),
		"smtp-from":             c.smtpFrom,
		"whatsapp-pacing":       fmt.Sprintf("%+v", c.agents.WhatsApp),
		"imessage-pacing":       fmt.Sprintf("%+v", c.agents.IMessage),
		"number-warmup":         c.agents.Warmup.String(),
		"console-streams":       fmt.Sprintf("%d/%d/%d per session/user/company", c.streams.PerSession, c.streams.PerUser, c.streams.PerCompany),
	}
}
