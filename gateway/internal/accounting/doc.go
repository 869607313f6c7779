// Package accounting holds what outlives policy reloads for metering a
// request: the Redis client, the rate limiter, the budget counter, the
// call-log writer (the ledger), the reconcile job that corrects the
// budget counter from the ledger, and the budget alerts' dispatcher; and
// what a finished request's call-log row owes to its plugins (Charges) and
// its write (WriteRow).
package accounting
