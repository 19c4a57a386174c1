package main

import (
	"encoding/json"
	"strconv"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/mail"
)

// sharedSettings are the settings every node of a cluster must run with
// (docs/cluster.md, "What each node needs"), each by its flag's name (the
// WARN names them, and the operator looks for those flags), as the nodes
// compare them over the bus (cluster.Settings): what a client is answered,
// what a company may do, what a link or a mail says. Secrets and long
// values go as digests keyed with key (cluster.Digest), the cluster's
// secret in the database. Left out are the settings of one node's own
// resources, which may differ: its address, directory, name, worker and
// connection counts, logs, the console's total of streams, its SMTP
// listener. --smtp-url is compared without its password, which a person
// chose.
func (c *serveConfig) sharedSettings(key []byte) map[string]string {
	plans, err := json.Marshal(c.plans)
	if err != nil { // plain records always marshal
		plans = []byte(err.Error())
	}
	out := map[string]string{
		"public-url":            c.publicURL,
		"rate-general":          c.general.String(),
		"rate-auth":             c.auth.String(),
		"rate-login":            c.login.String(),
		"message-ttl":           c.messageTTL.String(),
		"device-offline-grace":  c.offlineGrace.String(),
		"link-sweep":            c.linkSweep.String(),
		"node-live-window":      c.cluster.liveWithin.String(),
		"company-daily-storage": strconv.FormatInt(int64(c.companyDailyStorage), 10),
		"webhook-allow-private": strconv.FormatBool(c.webhookAllowPrivate),
		"plans":                 cluster.Digest(key, string(plans)),
		"default-plan":          c.defaultPlan,
		"stripe-key":            cluster.Digest(key, c.stripeKey),
		"stripe-webhook-secret": cluster.Digest(key, c.stripeWebhookSecret),
		"stripe-api-url":        c.stripeAPIURL,
		"admin-token":           cluster.Digest(key, c.adminToken),
		"signup":                c.signup,
		"smtp-url":              mail.Config{SMTPURL: c.smtpURL}.Redacted(),
		"smtp-from":             c.smtpFrom,
		"number-warmup":         c.agents.Warmup.String(),
		// The console's limits of one session, user and company are
		// counted over the cluster; --console-streams, this node's own
		// total, is not compared.
		"console-streams-per-session": strconv.Itoa(c.streams.PerSession),
		"console-streams-per-user":    strconv.Itoa(c.streams.PerUser),
		"console-streams-per-company": strconv.Itoa(c.streams.PerCompany),
	}
	for prefix, p := range map[string]channel.Pacing{"whatsapp": c.agents.WhatsApp, "imessage": c.agents.IMessage} {
		out[prefix+"-per-minute"] = strconv.Itoa(p.Caps.PerMinute)
		out[prefix+"-per-hour"] = strconv.Itoa(p.Caps.PerHour)
		out[prefix+"-per-day"] = strconv.Itoa(p.Caps.PerDay)
		out[prefix+"-gap-min"] = p.Gap.Min.String()
		out[prefix+"-gap-max"] = p.Gap.Max.String()
	}
	return out
}
