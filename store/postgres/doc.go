// Package postgres is the store on PostgreSQL (15 or later), for several
// nodes sharing one database (contract section 12). This is its groundwork:
// Open with a connection pool, the schema in versioned SQL migrations that
// every node applies at start under an advisory lock, and Ping for
// readiness. The tables of companies, messages and the rest follow the
// store interfaces the domain packages declare.
package postgres
