package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// TestWriteListWritesWhatCJSONWrote: the list routes that write their
// answers an item at a time (writeList) answer the bytes and the
// Content-Type c.JSON answered of the whole value: keys in the same order,
// HTML characters and U+2028 escaped, the same closing newline; an empty
// list too.
func TestWriteListWritesWhatCJSONWrote(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 4, 5, 123e6, time.UTC)
	texts := []string{"plain", `<b>&"quoted"</b>`, "line\u2028sep\u2029", "😀 \x01 tab\t", strings.Repeat("<", 5000)}
	var msgs []store.Message
	var convs []store.Conversation
	for i, text := range texts {
		m := store.Message{ID: uint64(i + 1), UUID: fmt.Sprintf("u-%d", i), Direction: store.Inbound, Text: text, Phone: "+15550000001",
			SIMSlot: "SIM1", Status: "received", CreatedAt: at, UpdatedAt: at, Segments: 1, Device: "acme-phone", ReceivedAt: "2026-11-22T10:04:05.123Z"}
		if i%2 == 1 {
			m.Direction, m.Status, m.Error = store.Outbound, "failed", "no <signal>"
		}
		msgs = append(msgs, m)
		convs = append(convs, store.Conversation{Phone: fmt.Sprintf("+1555000000%d", i), LastMessage: text, LastMessageAt: at, Direction: m.Direction, MessageCount: i + 1})
	}
	for _, n := range []int{0, 1, len(texts)} {
		pg := sms.Page{Messages: msgs[:n], Total: 7 * n, Page: 2, Pages: n}
		apg := channel.Page{Messages: msgs[:n], Total: 7 * n, Page: 2, Pages: n}
		for _, c := range []struct {
			name  string
			whole any
			list  func(echo.Context) error
		}{
			{"history", historyOut(pg), func(c echo.Context) error { return writeHistory(c, pg) }},
			{"conversations", conversationsOut(convs[:n]), func(c echo.Context) error { return writeConversations(c, convs[:n]) }},
			{"inbound", inboundItems(msgs[:n]), func(c echo.Context) error { return writeInbound(c, msgs[:n]) }},
			{"agent messages", agentMessagesOut(waChannel, apg), func(c echo.Context) error { return writeAgentMessages(c, waChannel, apg) }},
		} {
			want := answerOf(t, func(ec echo.Context) error { return ec.JSON(http.StatusOK, c.whole) })
			got := answerOf(t, c.list)
			if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") || got.Body.String() != want.Body.String() {
				t.Errorf("%s of %d: %d %q %s\nwant %d %q %s", c.name, n, got.Code, got.Header().Get("Content-Type"), got.Body,
					want.Code, want.Header().Get("Content-Type"), want.Body)
			}
		}
	}
}

// answerOf is what h answers, through Echo as the API runs it (its
// compact JSON).
func answerOf(t *testing.T, h echo.HandlerFunc) *httptest.ResponseRecorder {
	t.Helper()
	e := echo.New()
	e.JSONSerializer = compactJSON{}
	rec := httptest.NewRecorder()
	if err := h(e.NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec)); err != nil {
		t.Fatal(err)
	}
	return rec
}

// agentMessagesOut is a page of /whatsapp/messages or /imessage/messages
// as the route answered it with c.JSON.
func agentMessagesOut(ch agentChannel, pg channel.Page) map[string]any {
	items := make([]map[string]any, 0, len(pg.Messages))
	for _, m := range pg.Messages {
		items = append(items, agentMessageOut(ch, m))
	}
	return map[string]any{"messages": items, "total": pg.Total, "page": pg.Page, "pages": pg.Pages}
}
