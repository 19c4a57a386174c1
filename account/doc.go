// Package account holds companies, their users and every credential simrelay
// accepts: argon2id passwords, JWT access tokens with rotating refresh tokens,
// API keys, and the e-mailed verification, reset and invite tokens.
//
// Methods take the caller's Principal and answer *problem.Error for anything a
// client can act on; role checks per route live in the HTTP route table.
package account
