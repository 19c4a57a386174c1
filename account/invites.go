package account

import (
	"fmt"
	"strconv"
	"time"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
)

// InvitesPerDay bounds the invitations one company sends in a day: as many
// as it may have users (store.MaxUsers), so a whole team is invited at once.
// Each invitation is a mail of the server's own to an address the company
// names (outside the companies' mail outbox bound, sent before their
// webhook mails), and deleting an invitee gives its place back, so without
// it a company inviting and deleting in turn had the server mail strangers
// as fast as the rate limit and the storage budget let it, some 60,000 a
// day, ahead of every other company's mail.
const InvitesPerDay = 1000

// InviteScope is the scope of the invitations' windows among the windows a
// cluster shares (postgres.Windows).
const InviteScope = "invite"

// InviteRate is the rate InvitesPerDay sets: every node must count the
// shared windows at it.
func InviteRate() pacing.Rate { return pacing.Rate{Limit: InvitesPerDay, Window: 24 * time.Hour} }

// InviteWindows are windows every node of a cluster counts in
// (postgres.Windows at InviteRate).
type InviteWindows interface {
	Take(key string) (pacing.Result, error)
	Refund(key string, end time.Time) error
}

// ShareInvites has the invitations counted in w, so that a company sends
// InvitesPerDay from the whole cluster, not that many from each node; call
// it before serving. On one node nothing calls it and the count stays in
// the process's memory.
func (s *Service) ShareInvites(w InviteWindows) { s.sharedInvites = w }

// takeInvite counts one invitation of the company and says whether it may
// be made; refund takes it back, for one the store refused (nothing stored,
// no mail). While the shared windows do not answer, the node counts in its
// own memory (pacing.Shared): an invitation is never refused for the
// server's fault.
func (s *Service) takeInvite(companyID uint64) (refund func(), err error) {
	key := strconv.FormatUint(companyID, 10)
	res, refund := pacing.TakeRefundable(pacing.Shared[InviteWindows]{Local: s.invites, Cluster: s.sharedInvites, Failed: func(err error) {
		s.log.Warn("invitations: the shared count does not answer; counted in this node's memory", "company_id", companyID, "err", err)
	}}, key, func(err error) {
		s.log.Warn("invitations: a refused invitation stays counted until its window ends", "company_id", companyID, "err", err)
	})
	if !res.Allowed {
		secs := res.ResetSeconds()
		return nil, &problem.Error{Code: problem.RateLimited, RetryAfter: secs,
			Message: fmt.Sprintf("Your company sent its invitations of the day: the limit is %d in %s. Retry after %s.",
				InvitesPerDay, problem.InWords(InviteRate().Window), problem.Count(secs, "second"))}
	}
	return refund, nil
}
