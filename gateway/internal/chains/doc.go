// Package chains compiles what plans and tenants say about the policy's
// plugins (tenant.PluginOverrides: switched on or off, a JSON merge patch
// over the config) into the plugin host's per-request form
// (wasmhost.Override) for one pipeline, and checks such overrides for the
// admin API by configuring the plugin with them. See
// docs/adr/0017-plugin-chains.md.
package chains
