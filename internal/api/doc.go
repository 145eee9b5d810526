// Package api is the live scheduler's versioned HTTP/JSON API (/v1): the
// wire types, strict request decoding and validation (every rejection is a
// 4xx that names the field), the HTTP handler with bearer-token
// authentication, and the Go client the CLI and the agent use.
//
// # Routes
//
//	GET  /healthz                         liveness, no token needed
//	GET  /metrics                         Prometheus metrics (any valid token)
//	GET  /v1/whoami
//	POST /v1/jobs                         submit (JobRequest) → 201 Job
//	GET  /v1/jobs[?all=true&user=U&state=queued,running]
//	GET  /v1/jobs/{id}                    one job, with its history
//	POST /v1/jobs/{id}/cancel             (also DELETE /v1/jobs/{id})
//	GET  /v1/jobs/{id}/explain            why it waits: queue position, reasons per node
//	GET  /v1/jobs/{id}/logs[?attempt=&rank=&tail=&follow=true]
//	GET  /v1/nodes
//	POST /v1/nodes/{name}/undrain         admins (also /drain)
//	DELETE /v1/nodes/{name}               admins: remove (revoke its credential, requeue its jobs)
//	POST /v1/settings                     admins: {"key": "tickets/alice", "value": "4"}
//	POST /v1/tokens                       admins: {"user": "alice"} or {"agent": true, "label": "n1"}
//	GET  /v1/tokens, DELETE /v1/tokens/{id}   admins: list (no secrets), revoke
//	POST /v1/agent/enrol                  agent tokens: {"name"} → the node's credential, once
//	POST /v1/agent/register               a node's credential, for that node only (as below)
//	GET  /v1/agent/assignments?node=&session=&version=&wait=10s   long poll
//	POST /v1/agent/reports
//	POST /v1/agent/leave                  the agent shuts down: requeue its node's jobs now
//
// # Security
//
// Every route but /healthz needs "Authorization: Bearer <token>"; a missing
// or unknown token is a 401. User tokens call the user routes, agent tokens
// and node credentials the agent routes only (403 otherwise); an agent
// token only enrols, and a node's credential acts for its node only (the
// Backend checks). A job is charged to the token's user: a submission that
// names a user is rejected. The Backend enforces ownership: a user who is
// not an admin gets 403 for another user's job.
//
// Each token is rate-limited (RateLimit: 429 with Retry-After), and
// NewHTTPServer gives the API's http.Server its time-outs and a cap on open
// connections that closes the longest idle one to make room. Request bodies
// are decoded strictly (Decode): unknown or wrongly cased fields, duplicate
// keys and strings that are not UTF-8 are refused, naming the field.
//
// Errors are JSON, {"error": {"status", "code", "field", "message"}}, and the
// message starts with the field it is about ("gpus: must be 1 to 4096, got 0").
package api
