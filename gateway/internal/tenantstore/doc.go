// Package tenantstore opens the tenant store a policy names — its own
// tenants section (store/mem) or Postgres (store/pg) — with the cache in
// front of it, the LISTEN/NOTIFY listener that evicts cached entries on
// writes, and, over Postgres, the admin API. The proxy holds what Open
// returns for one policy state and closes it with the state.
package tenantstore
