// Package tenant authenticates API keys and derives each tenant's cache
// salt, so that tenants of one muser server never share KV cache entries.
//
// # The API key file
//
// `muser serve --api-keys FILE` reads a text file of one key per line:
//
//	# comment lines start with '#'; blank lines are ignored
//	KEY TENANT
//
// KEY is 16 to 256 characters from A–Z a–z 0–9 and "-._~+/=" (an OpenAI
// style "sk-..." key or base64 text); TENANT is 1 to 64 characters from
// A–Z a–z 0–9 and "-._@". Several keys may name one tenant (key
// rotation); a key may appear only once. The file must not be readable or
// writable by group or others (mode 0600 or stricter), must hold at most
// MaxKeys keys and be at most MaxFileBytes long; any violation is an error
// naming the file and line.
//
// Keys are not kept in memory: each is hashed with BLAKE3 keyed by a
// random per-process key, and a presented key is hashed the same way and
// compared with every entry in constant time (crypto/subtle), so neither
// the table nor the timing of a lookup reveals a key.
//
// # Cache salts
//
// A tenant's salt is a keyed BLAKE3 hash, under the server secret, of a
// domain string, the tenant name and the request's optional cache_salt
// (each length-prefixed). The server secret is 32 random bytes created
// once in the data directory (serve.key, mode 0600) and refused if its
// mode lets group or others read it. Two tenants therefore never get the
// same salt, a client choosing its own cache_salt cannot reach another
// tenant's entries, and salts cannot be guessed without the secret. The
// store keys every block by its salt (docs/kvpack.md, "Block keys").
package tenant
