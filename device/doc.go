// Package device pairs phones with companies and keeps their records:
// single-use pairing codes (shown as a QR code), registration that hands the
// phone its token, and the device list, changes and removal behind the REST
// API. The live links themselves belong to the gateway.
package device
