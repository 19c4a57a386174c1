package httpapi

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

type route struct {
	method, path string
	access       access
	handler      echo.HandlerFunc
}

// routes is the whole API in one table. Admin-only rows follow the contract's
// section 2; the credential routes are also in authScope (middleware.go).
func (s *Server) routes() []route {
	return []route{
		// Probes and documents: no credential, not counted.
		{http.MethodGet, "/healthz", public, s.healthz},
		{http.MethodGet, "/readyz", public, s.readyz},
		{http.MethodGet, "/metrics", public, s.metricsPage},
		{http.MethodGet, "/openapi.json", public, s.openapi},

		// Credentials.
		{http.MethodPost, "/auth/signup", public, s.signup},
		{http.MethodPost, "/auth/verify-email", public, s.verifyEmail},
		{http.MethodPost, "/auth/login", public, s.login},
		{http.MethodPost, "/auth/refresh", public, s.refresh},
		{http.MethodPost, "/auth/forgot-password", public, s.forgotPassword},
		{http.MethodPost, "/auth/reset-password", public, s.resetPassword},

		// Account and company.
		{http.MethodGet, "/account/api-key", admin, s.getAPIKey},
		{http.MethodPost, "/account/api-key/rotate", admin, s.rotateAPIKey},
		{http.MethodGet, "/users/me", member, s.getMe},
		{http.MethodPatch, "/users/me", member, s.patchMe},
		{http.MethodGet, "/users", member, s.listUsers},
		{http.MethodPost, "/users", admin, s.inviteUser},
		{http.MethodPatch, "/users/:id", admin, s.patchUser},
		{http.MethodDelete, "/users/:id", admin, s.deleteUser},
		{http.MethodGet, "/company", member, s.getCompany},
		{http.MethodPatch, "/company", admin, s.patchCompany},
		{http.MethodDelete, "/company", admin, s.closeCompany},
		{http.MethodGet, "/company/export", admin, s.companyExport},

		// Devices and their links.
		{http.MethodPost, "/device/pairing", member, s.createPairing},
		{http.MethodGet, "/device/pairing/:code/qr.png", member, s.pairingQR},
		{http.MethodPost, "/device/register", public, s.registerDevice},
		{http.MethodGet, "/device/ws", public, s.phoneSocket},
		{http.MethodGet, "/chat/devices", member, s.chatDevices},
		{http.MethodGet, "/device/list", member, s.deviceList},
		{http.MethodDelete, "/device/delete/:device_fingerprint", admin, s.deleteDevice},
		{http.MethodPatch, "/device/:device_fingerprint", member, s.patchDevice},
		{http.MethodGet, "/device/:device_fingerprint/caps", member, s.getSIMCaps},
		{http.MethodPut, "/device/:device_fingerprint/caps", member, s.putSIMCaps},

		// Sender pools (docs/routing.md): roles as for devices.
		{http.MethodGet, "/pools", member, s.listPools},
		{http.MethodPost, "/pools", member, s.createPool},
		{http.MethodGet, "/pools/:id", member, s.getPool},
		{http.MethodPatch, "/pools/:id", member, s.patchPool},
		{http.MethodDelete, "/pools/:id", admin, s.deletePool},
		{http.MethodPost, "/pools/:id/members", member, s.addPoolMember},
		{http.MethodDelete, "/pools/:id/members/:memberId", member, s.deletePoolMember},

		// Files of received messages: an agent uploads with its device
		// token; members read with theirs, webhook receivers by signed link.
		{http.MethodPost, "/device/media", public, s.uploadMedia},
		{http.MethodGet, "/media/:id", public, s.getMedia},

		// SMS.
		{http.MethodPost, "/chat/send", member, s.chatSend},
		{http.MethodPost, "/automation/send-sms", member, s.automationSend},
		{http.MethodGet, "/chat/queue/:queueId", member, s.queueStatus},
		{http.MethodDelete, "/chat/queue/:queueId", member, s.cancelQueued},
		{http.MethodPost, "/chat/send-bulk", member, s.chatSendBulk},
		{http.MethodGet, "/chat/messages", member, s.chatMessages},
		{http.MethodGet, "/chat/conversations", member, s.chatConversations},
		{http.MethodGet, "/automation/inbound-sms", member, s.inboundList},
		{http.MethodGet, "/automation/latest-sms", member, s.latestInbound},
		{http.MethodGet, "/opt-outs", member, s.listOptOuts},
		{http.MethodPost, "/opt-outs", member, s.addOptOut},
		{http.MethodDelete, "/opt-outs/:phone", member, s.removeOptOut},
		{http.MethodDelete, "/opt-outs", member, s.removeOptOutByQuery},

		// WhatsApp and iMessage (agents.go).
		{http.MethodGet, "/whatsapp/numbers", member, s.listNumbers(waChannel)},
		{http.MethodPatch, "/whatsapp/numbers/:number_id", member, s.patchNumber(waChannel)},
		{http.MethodPost, "/whatsapp/send", member, s.agentSend(waChannel)},
		{http.MethodGet, "/whatsapp/messages", member, s.agentMessages(waChannel)},
		{http.MethodGet, "/whatsapp/messages/:id", member, s.agentMessage(waChannel)},
		{http.MethodGet, "/imessage/handles", member, s.listNumbers(imChannel)},
		{http.MethodPatch, "/imessage/handles/:handle_id", member, s.patchNumber(imChannel)},
		{http.MethodPost, "/imessage/send", member, s.agentSend(imChannel)},
		{http.MethodGet, "/imessage/messages", member, s.agentMessages(imChannel)},
		{http.MethodGet, "/imessage/messages/:id", member, s.agentMessage(imChannel)},

		// The same operations as tools for AI agents (mcp.go, docs/mcp.md).
		{http.MethodPost, "/mcp", member, s.mcp},

		// Dashboard and analytics.
		{http.MethodGet, "/dashboard/summary", member, s.dashboardSummary},
		{http.MethodGet, "/analytics", member, s.analytics},
		{http.MethodGet, "/analytics/devices", member, s.analyticsDevices},

		// Billing.
		{http.MethodGet, "/plans", member, s.listPlans},
		{http.MethodGet, "/billing/subscription", member, s.getSubscription},
		{http.MethodPost, "/billing/subscribe", admin, s.subscribe},
		{http.MethodPost, "/billing/portal", admin, s.billingPortal},
		{http.MethodPost, "/billing/stripe/webhook", public, s.stripeWebhook},

		// Webhooks.
		{http.MethodGet, "/webhooks/inbound-sms", member, s.getWebhooks},
		{http.MethodPut, "/webhooks/inbound-sms", admin, s.putWebhooks},
		{http.MethodPost, "/webhooks/signing-secret/rotate", admin, s.rotateSigningSecret},
		{http.MethodGet, "/webhooks/deliveries", member, s.webhookDeliveries},

		// Operations.
		{http.MethodGet, "/admin/backup", operator, s.backup},

		// The web console (HTML, not part of the JSON API): everything under
		// /console/, the root's redirect to it, and the two pages e-mailed
		// links open. Its sign-in forms are rows of their own so they count
		// in the credential window (consoleCredentialPosts).
		{http.MethodGet, "/", public, s.console},
		{http.MethodGet, "/favicon.ico", public, s.console},
		{http.MethodGet, "/console", public, s.console},
		{http.MethodGet, "/console/static/*", public, s.console},
		{http.MethodGet, "/console/*", public, s.console},
		{http.MethodPost, "/console/*", public, s.console},
		{http.MethodPost, "/console/signin", public, s.console},
		{http.MethodPost, "/console/signup", public, s.console},
		{http.MethodPost, "/console/forgot-password", public, s.console},
		{http.MethodGet, "/verify-email", public, s.console},
		{http.MethodPost, "/verify-email", public, s.console},
		{http.MethodGet, "/reset-password", public, s.console},
		{http.MethodPost, "/reset-password", public, s.console},
	}
}

// consolePaths are the HTML pages; the OpenAPI document describes the JSON API only.
var consolePaths = map[string]bool{"/": true, "/favicon.ico": true, "/console": true, "/console/*": true, "/console/static/*": true, "/console/signin": true,
	"/console/signup": true, "/console/forgot-password": true, "/verify-email": true, "/reset-password": true}

// consoleCredentialPosts are the console's forms that check or set a
// password or spend an e-mailed token: like the API's /auth/* routes, each
// POST counts in the client address's credential window too.
var consoleCredentialPosts = map[string]bool{"/console/signin": true, "/console/signup": true,
	"/console/forgot-password": true, "/verify-email": true, "/reset-password": true}

// openAPIPath turns Echo's /users/:id into OpenAPI's /users/{id}.
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}
