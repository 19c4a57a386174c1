package account

import (
	"strconv"
	"time"

	"github.com/simrelay/simrelay/pacing"
)

// ResetScope is the scope of the reset mails' windows among the windows a
// cluster shares (postgres.Windows; the API's are "general", "members" and
// "auth").
const ResetScope = "reset-mail"

// ResetRate is the rate ResetMailsPerHour sets: every node must count the
// shared windows at it.
func ResetRate() pacing.Rate { return pacing.Rate{Limit: ResetMailsPerHour, Window: time.Hour} }

// ResetWindows are windows every node of a cluster counts in
// (postgres.Windows at ResetRate).
type ResetWindows interface {
	Take(key string) (pacing.Result, error)
}

// ShareResetMails has the reset mails counted in w, so that an account gets
// ResetMailsPerHour from the whole cluster, not that many from each node;
// call it before serving. On one node nothing calls it and the count stays
// in the process's memory. One row per account that asked in the hour, as
// the API's windows keep one per key.
func (s *Service) ShareResetMails(w ResetWindows) { s.sharedResets = w }

// resetAllowed counts one reset mail of the user and says whether it may
// go out. While the shared windows do not answer (the database is away,
// which fails the request's own reads too, so it is rare), the node counts
// in its own memory, as one node does (pacing.Shared): a reset is never refused for the
// server's fault, and an outage lets an account have at most
// ResetMailsPerHour more from each node.
func (s *Service) resetAllowed(userID uint64) bool {
	res, _ := pacing.Shared[ResetWindows]{Local: s.resetMails, Cluster: s.sharedResets, Failed: func(err error) {
		s.log.Warn("reset mails: the shared count does not answer; counted in this node's memory", "user_id", userID, "err", err)
	}}.Take(strconv.FormatUint(userID, 10))
	return res.Allowed
}
