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
//	POST /v1/nodes/{name}/undrain         admins
//	POST /v1/settings                     admins: {"key": "tickets/alice", "value": "4"}
//	POST /v1/tokens                       admins: {"user": "alice"} or {"agent": true, "label": "n1"}
//	POST /v1/agent/register               agent tokens only
//	GET  /v1/agent/assignments?node=&session=&version=&wait=10s   long poll
//	POST /v1/agent/reports
//
// # Security
//
// Every route but /healthz needs "Authorization: Bearer <token>"; a missing
// or unknown token is a 401. User tokens call the user routes, agent tokens
// the agent routes only (403 otherwise). A job is charged to the token's
// user: a submission that names a user is rejected. The Backend enforces
// ownership: a user who is not an admin gets 403 for another user's job.
//
// Errors are JSON, {"error": {"status", "code", "field", "message"}}, and the
// message starts with the field it is about ("gpus: must be 1 to 4096, got 0").
package api
