package channel

import "time"

// SetRemovedEvery sets the period of Run's look for companies removed
// elsewhere (RemovedEvery); call it before Run.
func SetRemovedEvery(s *Service, d time.Duration) { s.removedEvery = d }
