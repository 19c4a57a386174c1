// Package media keeps the files that come with received WhatsApp and
// iMessage messages: an agent uploads each one with its device token
// (POST /device/media) before the inbound frame that names it, bounded in
// size and counted in the company's storage budget; members read it back
// (GET /media/{id}), and webhook receivers through a signed URL that
// expires.
package media
