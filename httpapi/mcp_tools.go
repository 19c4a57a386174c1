package httpapi

import (
	"context"
	"encoding/json"
	"math"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
)

// The MCP tools (docs/mcp.md). Each is a member-level REST route, so an
// API key and every user of the company may call them all; the admin-only
// operations have no tool.

type smsToolArgs struct {
	// The device that sends, or the sender pool that chooses it and its SIM:
	// one of the two, as in POST /chat/send's body.
	DeviceFingerprint string `json:"device_fingerprint,omitempty" jsonschema:"the fingerprint of the company's phone that sends it (list_devices names them); give this or pool"`
	Pool              string `json:"pool,omitempty" jsonschema:"the name of the company's sender pool that chooses the phone and SIM (list_pools names them); give this or device_fingerprint"`
	Phone             string `json:"phone" jsonschema:"the recipient in E.164 (+ and 8 to 15 digits), or written as in the company's region when it has set one"`
	Message           string `json:"message" jsonschema:"the text, at most 1600 characters"`
	SIMSlot           string `json:"sim_slot,omitempty" jsonschema:"SIM1 or SIM2 of the device; SIM1 when left out; none with pool, which chooses the SIM"`
	SendAt            string `json:"send_at,omitempty" jsonschema:"optional RFC 3339 time, in the future and at most 30 days ahead, to schedule the message"`
	IdempotencyKey    string `json:"idempotency_key,omitempty" jsonschema:"optional; the same key from the company within 24 hours answers the first send again and sends nothing new (the REST API's Idempotency-Key header)"`
}

type whatsAppToolArgs struct {
	NumberID       string `json:"number_id" jsonschema:"the number_id of the company's WhatsApp number that sends it (list_numbers names them)"`
	To             string `json:"to" jsonschema:"the recipient in E.164 (+ and 8 to 15 digits), or written as in the company's region when it has set one"`
	Content        string `json:"content,omitempty" jsonschema:"the text; required for type text, a caption otherwise"`
	Type           string `json:"type,omitempty" jsonschema:"text (the default), image, video, audio or document"`
	MediaURL       string `json:"media_url,omitempty" jsonschema:"https URL of the media; required unless type is text"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"optional; the same key from the company within 24 hours answers the first send again and sends nothing new (the REST API's Idempotency-Key header)"`
}

func (a whatsAppToolArgs) send() (agentSendBody, string) {
	return agentSendBody{NumberID: a.NumberID, To: a.To, Content: a.Content, Type: a.Type, MediaURL: a.MediaURL}, a.IdempotencyKey
}

type iMessageToolArgs struct {
	HandleID       string `json:"handle_id" jsonschema:"the handle_id of the company's iMessage handle that sends it (list_numbers names them)"`
	To             string `json:"to" jsonschema:"the recipient: E.164 (or as written in the company's region when it has set one) or an e-mail address"`
	Content        string `json:"content,omitempty" jsonschema:"the text; required for type text, a caption otherwise"`
	Type           string `json:"type,omitempty" jsonschema:"text (the default), image, video, audio or document"`
	MediaURL       string `json:"media_url,omitempty" jsonschema:"https URL of the media; required unless type is text"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"optional; the same key from the company within 24 hours answers the first send again and sends nothing new (the REST API's Idempotency-Key header)"`
}

func (a iMessageToolArgs) send() (agentSendBody, string) {
	return agentSendBody{HandleID: a.HandleID, To: a.To, Content: a.Content, Type: a.Type, MediaURL: a.MediaURL}, a.IdempotencyKey
}

type conversationsArgs struct {
	DeviceFingerprint string `json:"device_fingerprint" jsonschema:"the fingerprint of one of the company's devices (list_devices names them)"`
	Limit             *int   `json:"limit,omitempty" jsonschema:"how many conversations, the latest first, 1 to 1000 (50 when left out)"`
}

// mcpConversations is how many conversations list_conversations answers
// when its call names no limit: a page's worth for a model's context,
// where GET /chat/conversations answers up to sms.MaxConversations.
const mcpConversations = 50

type conversationArgs struct {
	DeviceFingerprint string `json:"device_fingerprint" jsonschema:"the fingerprint of one of the company's devices (list_devices names them)"`
	Phone             string `json:"phone" jsonschema:"the other party in E.164, or as written in the company's region when it has set one"`
	Page              *int   `json:"page,omitempty" jsonschema:"page number from 1 (the default)"`
	Limit             *int   `json:"limit,omitempty" jsonschema:"messages per page, 1 to 100 (50 when left out)"`
}

type inboundArgs struct {
	DeviceFingerprint string `json:"device_fingerprint,omitempty" jsonschema:"optional: only this device's messages"`
	SIMSlot           string `json:"sim_slot,omitempty" jsonschema:"optional: SIM1 or SIM2"`
	Limit             *int   `json:"limit,omitempty" jsonschema:"how many, 1 to 50 (50 when left out)"`
}

type numbersArgs struct {
	Channel string `json:"channel,omitempty" jsonschema:"whatsapp: the WhatsApp numbers alone, as GET /whatsapp/numbers; imessage: the iMessage handles alone, as GET /imessage/handles; both when left out"`
}

type statusArgs struct {
	ID      string `json:"id" jsonschema:"the send's id: queueId of send_sms, id of send_whatsapp or send_imessage"`
	Channel string `json:"channel,omitempty" jsonschema:"sms (the default), whatsapp or imessage"`
}

// newMCPTools are the tools; tools/list shows them by name, as the SDK
// orders them, whatever their order here.
func (s *Server) newMCPTools() []mcpTool {
	return []mcpTool{
		tool("send_sms", "Send an SMS",
			"Queue an SMS through one of the company's phones, named by device_fingerprint, or through a sender pool, "+
				"which chooses the phone and SIM; answers {message:\"queued\"|\"scheduled\", queueId}, and through a pool "+
				"also {pool, device_fingerprint, sim_slot}. Follow it with message_status. Same rules as POST /chat/send.", false,
			func(ctx context.Context, p account.Principal, in smsToolArgs) (any, error) {
				body := sendBody{DeviceFingerprint: in.DeviceFingerprint, Pool: in.Pool, Phone: in.Phone, Message: in.Message, SIMSlot: in.SIMSlot, SendAt: in.SendAt}
				return mcpSent(s.sendSMS(ctx, p, body, newIdempotencyKey(in.IdempotencyKey, "/chat/send", body), chatSendAnswer))
			}),
		agentSendTool[whatsAppToolArgs](s, waChannel, "send_whatsapp", "Send a WhatsApp message",
			"Queue a WhatsApp message from one of the company's numbers (its number_id from list_numbers); answers {status:\"queued\", id}. Same rules and caps as POST /whatsapp/send."),
		agentSendTool[iMessageToolArgs](s, imChannel, "send_imessage", "Send an iMessage",
			"Queue an iMessage from one of the company's handles (its handle_id from list_numbers); answers {status:\"queued\", id}. Same rules and caps as POST /imessage/send."),
		tool("list_numbers", "List WhatsApp numbers and iMessage handles",
			"The company's WhatsApp numbers and iMessage handles: each one's id, address, device, whether it is online, "+
				"status, caps in force and sends today, as GET /whatsapp/numbers answers {numbers:[...]} and GET /imessage/handles "+
				"{handles:[...]}. channel whatsapp or imessage answers that route's list alone; left out, both. "+
				"send_whatsapp takes a number's number_id, send_imessage a handle's handle_id.", true,
			func(ctx context.Context, p account.Principal, in numbersArgs) (any, error) {
				// The argument is checked first, as a route reads its query
				// string before its service runs.
				if in.Channel != "" && in.Channel != channel.WhatsApp && in.Channel != channel.IMessage {
					return nil, problem.Invalid("channel", "must be whatsapp or imessage")
				}
				svc, err := s.channels()
				if err != nil {
					return nil, err
				}
				out := map[string]any{}
				for _, ch := range []agentChannel{waChannel, imChannel} {
					if in.Channel != "" && in.Channel != ch.name {
						continue
					}
					list, err := s.numbersList(ctx, svc, p.CompanyID, ch)
					if err != nil {
						return nil, err
					}
					out[ch.listName] = list
				}
				return out, nil
			}),
		tool("list_devices", "List devices",
			"The company's devices with their status, whether they are online, when they were last seen and their SIMs, as GET /device/list.", true,
			func(ctx context.Context, p account.Principal, _ struct{}) (any, error) {
				return s.deviceDetails(ctx, p.CompanyID)
			}),
		tool("list_pools", "List sender pools",
			"The company's sender pools with their strategy, failover and members (device and SIM), as GET /pools; "+
				"send_sms takes a pool's name in place of a device.", true,
			func(ctx context.Context, p account.Principal, _ struct{}) (any, error) {
				ps, err := s.deps.SMS.Pools(ctx, p.CompanyID)
				if err != nil {
					return nil, err
				}
				out := make([]poolJSON, len(ps))
				for i, pl := range ps {
					out[i] = poolOut(pl)
				}
				return map[string]any{"pools": out}, nil
			}),
		tool("list_conversations", "List conversations",
			"One device's SMS conversations, the latest first, as GET /chat/conversations: 50 unless limit says otherwise (up to 1000).", true,
			func(ctx context.Context, p account.Principal, in conversationsArgs) (any, error) {
				limit, err := argRange("limit", in.Limit, mcpConversations, 1, sms.MaxConversations)
				if err != nil {
					return nil, err
				}
				convs, err := s.deps.SMS.Conversations(ctx, p.CompanyID, in.DeviceFingerprint, limit)
				if err != nil {
					return nil, err
				}
				return conversationsOut(convs), nil
			}),
		tool("read_conversation", "Read a conversation",
			"The SMS messages between one device and one number, both directions, newest first, a page at a time, as GET /chat/messages.", true,
			func(ctx context.Context, p account.Principal, in conversationArgs) (any, error) {
				page, err := argRange("page", in.Page, 1, 1, math.MaxInt)
				if err != nil {
					return nil, err
				}
				limit, err := argRange("limit", in.Limit, sms.DefaultPageLimit, 1, sms.MaxPageLimit)
				if err != nil {
					return nil, err
				}
				pg, err := s.deps.SMS.History(ctx, p.CompanyID, in.DeviceFingerprint, in.Phone, page, limit)
				if err != nil {
					return nil, err
				}
				return historyOut(pg), nil
			}),
		tool("latest_inbound", "Read the latest inbound SMS",
			"The newest inbound SMS messages, newest first, optionally of one device and SIM, as GET /automation/inbound-sms; answers {messages:[...]}.", true,
			func(ctx context.Context, p account.Principal, in inboundArgs) (any, error) {
				limit, err := argRange("limit", in.Limit, sms.InboundListSize, 1, sms.InboundListSize)
				if err != nil {
					return nil, err
				}
				msgs, err := s.deps.SMS.InboundList(ctx, p.CompanyID, in.DeviceFingerprint, in.SIMSlot, limit)
				if err != nil {
					return nil, err
				}
				return map[string]any{"messages": inboundItems(msgs)}, nil
			}),
		tool("message_status", "Read a message's status",
			"The status of one sent message: queued, scheduled, sending, sent, delivered, failed (with error), expired or canceled. "+
				"For sms as GET /chat/queue/{queueId}; for whatsapp and imessage the message as GET /whatsapp/messages/{id}.", true,
			func(ctx context.Context, p account.Principal, in statusArgs) (any, error) {
				// The route takes the id from its path, where it cannot be
				// empty; a tool's caller can leave it out, and is told so
				// as for every other required argument, not "no such message".
				if in.ID == "" {
					return nil, problem.Invalid("id", "is required")
				}
				switch in.Channel {
				case "", "sms":
					m, err := s.deps.SMS.Queued(ctx, p.CompanyID, in.ID)
					if err != nil {
						return nil, err
					}
					return queueItem(m, s.deps.Now()), nil
				case channel.WhatsApp, channel.IMessage:
					ch := waChannel
					if in.Channel == channel.IMessage {
						ch = imChannel
					}
					svc, err := s.channels()
					if err != nil {
						return nil, err
					}
					m, err := svc.Message(ctx, p.CompanyID, ch.name, in.ID)
					if err != nil {
						return nil, err
					}
					return agentMessageOut(ch, m), nil
				}
				return nil, problem.Invalid("channel", "must be sms, whatsapp or imessage")
			}),
	}
}

// argRange is a tool's optional integer argument that takes least to most
// (a page, a limit): def when it is left out, and otherwise refused with
// the one sentence of its range, checked first, as the REST route reads
// its query string (queryRange) before its service checks the rest, so
// the tool's first error is the route's.
func argRange(name string, v *int, def, least, most int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < least || *v > most {
		return 0, problem.OutOfRange(name, least, most)
	}
	return *v, nil
}

// agentToolArgs are send_whatsapp's or send_imessage's arguments: the
// route's body and the idempotency key.
type agentToolArgs interface {
	send() (agentSendBody, string)
}

// agentSendTool is send_whatsapp or send_imessage: the route's body and
// the key from the tool's arguments.
func agentSendTool[In agentToolArgs](s *Server, ch agentChannel, name, title, description string) mcpTool {
	route := "/" + ch.name + "/send"
	return tool(name, title, description, false,
		func(ctx context.Context, p account.Principal, in In) (any, error) {
			body, key := in.send()
			return mcpSent(s.sendAgent(ctx, ch, p, body, newIdempotencyKey(key, route, body)))
		})
}

// mcpSent is a send's answer as a tool's result: the route's JSON, the
// first answer again for a retried key.
func mcpSent(out sent, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return json.RawMessage(out.body), nil
}
