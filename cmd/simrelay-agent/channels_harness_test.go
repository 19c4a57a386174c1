package main

import (
	"encoding/json"
	"net/http"
	"strings"
)

// agentID is the id of the number (GET /whatsapp/numbers) or handle (GET
// /imessage/handles) addr, once it is listed online; "" until then.
func (s *server) agentID(channel, addr string) string {
	s.t.Helper()
	path, list, idKey, addrKey := "/whatsapp/numbers", "numbers", "number_id", "phone"
	if channel == "imessage" {
		path, list, idKey, addrKey = "/imessage/handles", "handles", "handle_id", "handle"
	}
	code, b, err := s.call("GET", path, nil)
	if err != nil || code != http.StatusOK {
		return ""
	}
	var ans map[string][]map[string]any
	_ = json.Unmarshal(b, &ans)
	for _, n := range ans[list] {
		if n[addrKey] == addr && n["online"] == true {
			id, _ := n[idKey].(string)
			return id
		}
	}
	return ""
}

// agentSend posts a send to /whatsapp/send or /imessage/send and returns its id.
func (s *server) agentSend(channel string, body map[string]any) string {
	s.t.Helper()
	var ans struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	_ = json.Unmarshal(s.must("POST", "/"+channel+"/send", body, http.StatusAccepted), &ans)
	if ans.ID == "" || ans.Status != "queued" {
		s.t.Fatalf("send answered %+v", ans)
	}
	return ans.ID
}

// agentStatus is a send's status and error: GET /{channel}/messages/{id}.
func (s *server) agentStatus(channel, id string) (status, errText string) {
	code, b, err := s.call("GET", "/"+channel+"/messages/"+id, nil)
	if err != nil || code != http.StatusOK {
		return "", ""
	}
	var m struct {
		Status string  `json:"status"`
		Error  *string `json:"error"`
	}
	_ = json.Unmarshal(b, &m)
	if m.Error != nil {
		errText = *m.Error
	}
	return m.Status, errText
}

// hookCount is how many webhook deliveries mention all of parts.
func (w *webhookSink) hookCount(parts ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
next:
	for _, b := range w.bodies {
		for _, p := range parts {
			if !strings.Contains(b, p) {
				continue next
			}
		}
		n++
	}
	return n
}
