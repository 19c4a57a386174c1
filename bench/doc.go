// Package bench is simrelay's load harness behind `simrelay bench`: it starts
// a real server process on loopback over a temporary store, connects virtual
// phones (the reference client) from 127.0.0.x source addresses, and measures
// what we claim: memory per idle phone, durable send throughput, one phone's
// drain of a backlog, send -> phone and inbound -> webhook latency, and list
// latency over a large history.
// It reports; it never passes or fails.
package bench
