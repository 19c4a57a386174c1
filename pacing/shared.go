package pacing

import "time"

// ClusterWindows are windows the nodes of a cluster count in together, in
// the store's rows (postgres.Windows). Unlike Windows, a call fails while
// the database does not answer.
type ClusterWindows interface {
	Take(key string) (Result, error)
}

// RefundableWindows are cluster windows that also take a request back
// (postgres.Windows.Refund), from the window that counted it (end: its
// Result's End) and no later one.
type RefundableWindows interface {
	ClusterWindows
	Refund(key string, end time.Time) error
}

// Shared is a count the nodes of a cluster share, with this node's memory
// as the fallback: it counts in Cluster where there is one (a node of a
// cluster, on PostgreSQL) and it answers, and in Local otherwise: on one
// node (the embedded store, no Cluster), and on a node of a cluster while
// Cluster does not answer. So nothing is refused for the server's fault;
// the price of an outage is that a key may have Local's limit more from
// each node, and the shared count takes over again from the database's
// first answer.
//
// W is the caller's interface of the cluster's windows, so that what else
// it asks of them (a refund, Spent) reaches them through Cluster; it is an
// interface type, whose zero value, nil, is no Cluster. Shared is a small
// value: a caller whose Failed names the request builds one where it
// counts.
type Shared[W ClusterWindows] struct {
	// Local counts in this process's memory.
	Local *Windows
	// Cluster counts for the whole cluster; nil on one node.
	Cluster W
	// Failed hears each error of Cluster before Local counts instead (the
	// caller logs it); nil hears nothing.
	Failed func(err error)
}

// Clustered says whether there is a Cluster to count in.
func (s Shared[W]) Clustered() bool { return any(s.Cluster) != nil }

// Take counts one request of key: in Cluster where there is one and it
// answers, in Local otherwise. inCluster says which counted it: a request
// taken back (Windows.Refund) is taken back where it was counted.
func (s Shared[W]) Take(key string) (res Result, inCluster bool) {
	if s.Clustered() {
		res, err := s.Cluster.Take(key)
		if err == nil {
			return res, true
		}
		s.Fail(err)
	}
	return s.Local.Take(key), false
}

// Fail tells Failed of an error of Cluster, for a caller's own call of it
// that falls back to Local as Take does (a Spent).
func (s Shared[W]) Fail(err error) {
	if s.Failed != nil {
		s.Failed(err)
	}
}

// TakeRefundable counts one request of key in s as Take does, and hands
// back the refund that takes it back (Windows.Refund) where it was counted:
// from Local, or from Cluster, whose error refundFailed hears (the caller
// logs it; the request then stays counted until its window ends); nil
// hears nothing. A refund is for a request that proved not to be what the
// windows count; the caller that does not refund drops it.
func TakeRefundable[W RefundableWindows](s Shared[W], key string, refundFailed func(err error)) (res Result, refund func()) {
	res, inCluster := s.Take(key)
	if !inCluster {
		return res, func() { s.Local.Refund(key, res.End) }
	}
	return res, func() {
		if err := s.Cluster.Refund(key, res.End); err != nil && refundFailed != nil {
			refundFailed(err)
		}
	}
}
