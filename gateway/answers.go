package gateway

// Reports are pipelined. The reader hands each ack and status to the
// store's group commit and reads the phone's next frame at once; the link's
// answerer goroutine waits for the commits, oldest first, and only then
// answers (status_ack), frees the job's place in the window and refills it.
// So a phone emptying a backlog gets many of its reports into one fsync,
// nothing is acknowledged before it is durable, and answers keep the order
// of the frames they answer (PROTOCOL.md 11.1): a frame whose answer is
// ready at once (an inbound stored, a refusal) still waits behind the
// answers queued before it. The places the answers free in the window are
// refilled a half window at a time while more answers wait (refill).

// reportsPerJob bounds the frames a link may have waiting for their answers,
// per place of its window: an ack, sent and delivered for each job. The
// reader stops reading (and TCP slows the phone) while that many wait, so
// what a phone can make the server hold stays bounded by its window.
const reportsPerJob = 3

// answer is what is left to do for one frame once the reader handed it on:
// wait for its commit if it has one, then answer the phone.
type answer func()

// later queues a behind the answers of earlier frames, waiting while the
// link has its limit of frames unanswered. Reader goroutine only.
func (c *conn) later(a answer) {
	if c.room == nil {
		c.room = make(chan struct{}, c.hub.cfg.MaxInflight*reportsPerJob)
	}
	c.room <- struct{}{}
	c.amu.Lock()
	c.answers = append(c.answers, a)
	start := !c.answering
	c.answering = true
	c.amu.Unlock()
	if start {
		c.spawn(taskAnswerer, c.answerLoop) // the reader has not ended: never refused
	}
}

// answerNow runs an answer that is ready: at once when no earlier frame
// waits for its answer, else behind those. Reader goroutine only (only the
// reader starts the answerer, so an idle one stays idle meanwhile).
func (c *conn) answerNow(a answer) {
	c.amu.Lock()
	busy := c.answering
	c.amu.Unlock()
	if busy {
		c.later(a)
		return
	}
	a()
}

// answerLoop is the link's answerer: it runs while answers wait, so an idle
// phone costs no goroutine, and it answers every frame handed to it even
// after the link ended (the commits are under way; their answers then go
// nowhere), which is what lets the reader and Shutdown wait for it.
func (c *conn) answerLoop() {
	for {
		c.amu.Lock()
		if len(c.answers) == 0 {
			c.answers, c.answering = nil, false
			c.amu.Unlock()
			return
		}
		a := c.answers[0]
		c.answers[0] = nil
		c.answers = c.answers[1:]
		c.amu.Unlock()
		a()
		<-c.room
		c.amu.Lock()
		idle := len(c.answers) == 0
		c.amu.Unlock()
		c.refill(idle)
	}
}
