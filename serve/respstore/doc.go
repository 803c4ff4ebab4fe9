// Package respstore keeps the stored responses of the OpenAI Responses API
// (POST /v1/responses with store: true) so that a later request can
// continue one by previous_response_id, across restarts.
//
// # Layout
//
// One bbolt file, responses.db under the server's home, with one bucket,
// "responses". A key is the tenant's name, a zero byte and the response
// ID; a value is the record's JSON (Record). A tenant's lookups only ever
// build keys under its own name, so a tenant never sees, continues or
// deletes another's responses, even when it knows their IDs.
//
// # Bounds
//
// A record is at most MaxRecordBytes; Put refuses a larger one. Get
// refuses a stored value that does not decode (a damaged file) with an
// error wrapping ErrCorrupt rather than panicking.
package respstore
