// Package tenantspec is the policy's tenants section as declared — plans,
// tenants, keys and prices — and its validation into the tenant package's
// values. The config package validates a policy with it, and the memory
// tenant store (store/mem) serves what it builds, so the configuration
// does not depend on a store.
package tenantspec
