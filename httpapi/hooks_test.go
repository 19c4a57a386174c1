package httpapi

// ListReadsWaiting is how many list reads wait for one of their company's
// places now (companySlots.take), of every company.
func (s *Server) ListReadsWaiting() int64 { return s.reads.waiting.Load() }
