package boltstore

import "time"

// detailRank orders details so a late or repeated receipt never moves one
// backwards: played implies read.
var detailRank = map[string]int{"": 0, DetailRead: 1, DetailPlayed: 2}

// keepsDetail says whether a message's channel stores details: the agent
// channels, whose receipts carry them. SMS has no read receipts.
func keepsDetail(m Message) bool {
	return m.Channel == ChannelNameWhatsApp || m.Channel == ChannelNameIMessage
}

// TransitionDetail is Transition with a delivered report's detail. On an
// agent channel's message the detail is kept with the move to delivered
// or, when the message is already delivered, moves on its own (only
// forwards): the detail and updated_at change, nothing else. moved is true
// for either change. On SMS the detail is ignored.
func (s *Store) TransitionDetail(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) (Message, bool, error) {
	return s.transition(companyID, deviceID, uuid, status, errText, statusAt, detail, now)
}

// applyDetail moves a delivered message's detail forwards; changed says
// it did, and that the report's transaction must write m.
func applyDetail(m *Message, status, detail string, now time.Time) (changed bool) {
	if detail == "" || status != MsgDelivered || m.Status != MsgDelivered || !keepsDetail(*m) {
		return false
	}
	if detailRank[detail] <= detailRank[m.Detail] {
		return false
	}
	m.Detail, m.UpdatedAt = detail, now.UTC()
	return true
}
